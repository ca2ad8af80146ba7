package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// inline: [text](target) and ![alt](target), with an optional title.
	inline = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// reference: [label]: target
	reference = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
	heading   = regexp.MustCompile(`(?m)^#{1,6}\s+(.*?)\s*#*\s*$`)
	// What GitHub drops from a heading to make its anchor.
	notSlug = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// markdownFiles is README.md and every Markdown file under docs/.
func markdownFiles(t *testing.T) []string {
	files := []string{"../README.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// prose is a Markdown file without its code: fenced blocks, and code
// spans unless keepSpans, where brackets and parentheses are not links.
func prose(text string, keepSpans bool) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		switch {
		case fenced:
		case keepSpans:
			b.WriteString(line)
		default:
			b.WriteString(codeSpan.ReplaceAllString(line, ""))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// anchors are the anchors of a Markdown file's headings, as GitHub makes
// them: lower case, punctuation dropped, spaces as hyphens, a repeated one
// with -1, -2 ...
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(prose(text, true), -1) {
		h := strings.NewReplacer("`", "", "*", "").Replace(m[1])
		s := strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// TestLinks: every link of README.md and docs/ to the tree resolves, to a
// file or directory that exists and, with #anchor, to a heading of that
// Markdown file. Links to other sites are left alone (no network here).
func TestLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, f := range markdownFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := prose(string(data), false)
		var targets []string
		for _, m := range inline.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range reference.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %s: no such file %s", f, target, file)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if cache[file] == nil {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
				cache[file] = anchors(string(b))
			}
			if !cache[file][anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", f, target, file, anchor)
			}
		}
	}
}
