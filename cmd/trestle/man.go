package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/trestle/trestle/internal/config"
)

// tomlPage is trestle.toml(5) as written by hand, with @KEYS@ where the
// key list goes (generated from the config's key table), @DATE@ and
// @VERSION@.
//
//go:embed trestle.toml.5.in
var tomlPage string

// manCmd writes the man pages: trestle(8) and one per command, from the
// command tree (cobra's doc generator), and trestle.toml(5). Hidden: the
// Makefile runs it at build time; users read the pages with man.
func (e *env) manCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages (trestle(8), one per command, trestle.toml(5)) into DIR",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(_ *cobra.Command, args []string) error {
			n, err := writeManPages(root, args[0], manDate(e.getenv))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %d man pages into %s\n", n, args[0])
			return nil
		},
	}
}

// manDate is the pages' date: SOURCE_DATE_EPOCH's when set (reproducible
// builds, as Debian's packaging sets it), else today's.
func manDate(getenv func(string) string) time.Time {
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC()
}

// writeManPages writes every page into dir and returns how many.
func writeManPages(root *cobra.Command, dir string, date time.Time) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	root.DisableAutoGenTag = true
	markdownLong(root)
	hdr := &doc.GenManHeader{
		Title:   "TRESTLE",
		Section: "8",
		Date:    &date,
		Source:  "trestle " + version,
		Manual:  "trestle manual",
	}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return 0, fmt.Errorf("man pages: %w", err)
	}
	page := strings.NewReplacer("@DATE@", date.Format("Jan 2006"), "@VERSION@", version, "@KEYS@", roffKeys()).Replace(tomlPage)
	if err := os.WriteFile(filepath.Join(dir, "trestle.toml.5"), []byte(page), 0o644); err != nil {
		return 0, err
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.[58]"))
	return len(pages), err
}

// markdownLong rewrites each command's Long help, written for a terminal,
// as the Markdown the man page generator reads. A run of indented lines is
// kept as it is (a code block), unless it is a table of terms, each line
// "  TERM   what it is" with continuation lines indented deeper (the
// scenarios, the DUTs): that becomes a list, so that the page wraps its
// long descriptions.
func markdownLong(c *cobra.Command) {
	for _, sub := range c.Commands() {
		markdownLong(sub)
	}
	if m := c.Annotations[manLong]; m != "" {
		c.Long = m
		return
	}
	var out []string
	lines := strings.Split(c.Long, "\n")
	for i := 0; i < len(lines); {
		if !indented(lines[i]) {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && (indented(lines[j]) || strings.TrimSpace(lines[j]) == "" && j+1 < len(lines) && indented(lines[j+1])) {
			j++
		}
		out = append(out, "")
		if items, ok := termList(lines[i:j]); ok {
			out = append(out, items...)
		} else {
			out = append(out, "```")
			out = append(out, lines[i:j]...)
			out = append(out, "```")
		}
		out = append(out, "")
		i = j
	}
	c.Long = strings.Join(out, "\n")
}

// manLong is the annotation of a command whose man page describes it with
// other Markdown than its --help (trestle-lab(8): the scenario table).
const manLong = "man-long"

func indented(line string) bool { return strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") }

// termLine is a line of a table of terms: the term at an indent of at most
// 4, two or more spaces, then what it is.
var termLine = regexp.MustCompile(`^ {1,4}(\S+(?: \S+)*?) {2,}(\S.*)$`)

// termList returns the lines as a Markdown list of terms, if they are a
// table of terms.
func termList(lines []string) ([]string, bool) {
	if !termLine.MatchString(lines[0]) {
		return nil, false
	}
	var items []string
	indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch m := termLine.FindStringSubmatch(l); {
		case trimmed == "":
		case m != nil && len(l)-len(strings.TrimLeft(l, " ")) == indent:
			items = append(items, fmt.Sprintf("- `%s`: %s", m[1], m[2]))
		case len(l)-len(strings.TrimLeft(l, " ")) > indent && len(items) > 0:
			items[len(items)-1] += " " + trimmed
		default:
			return nil, false
		}
	}
	return items, true
}

// roffKeys is the KEYS section of trestle.toml(5): each table of the
// config's key table with its keys, as docs/configuration.md's reference
// lists them.
func roffKeys() string {
	var b strings.Builder
	for _, t := range config.Tables {
		fmt.Fprintf(&b, ".SS %s\n", roff(t.Header()))
		if t.Inline {
			fmt.Fprintf(&b, "In %s. ", roff(config.TableOf(t.Path[:strings.LastIndexByte(t.Path, '.')]).Header()))
		}
		fmt.Fprintf(&b, "%s\n", roff(t.Help))
		for _, k := range t.Keys {
			def := ""
			switch {
			case k.Required:
				def = "required"
			case k.Default != "":
				def = "default " + k.Default
			}
			fmt.Fprintf(&b, ".TP\n.B %s\n", roff(k.Name))
			line := k.Type()
			if def != "" {
				line += "; " + def
			}
			fmt.Fprintf(&b, "(%s)\n%s\n", roff(line), roff(k.Help))
			for _, v := range k.Values {
				if v.Help != "" {
					fmt.Fprintf(&b, ".RS\n.TP\n.B %s\n%s\n.RE\n", roff(strconv.Quote(v.Name)), roff(v.Help))
				}
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// roff escapes text for a line of a man page: backslashes, hyphens (so
// they stay hyphens in copy and paste), and a control character at a line's
// start.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`, "\n", " ").Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
