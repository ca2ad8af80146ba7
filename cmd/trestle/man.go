package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/instance"
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
	docs := DocDir
	c := &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages (trestle(8), one per command, trestle.toml(5)) into DIR",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(_ *cobra.Command, args []string) error {
			n, err := writeManPages(root, args[0], manDate(e.getenv), docs)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %d man pages into %s\n", n, args[0])
			return nil
		},
	}
	c.Flags().StringVar(&docs, "doc-dir", DocDir, "where the documents the pages name are installed (make install: PREFIX/share/doc/trestle)")
	return c
}

// DocDir is where the Debian package puts the documents (README.md and
// docs/*.md) that the pages name: scripts/deb.sh ships them there, make
// install under its PREFIX.
const DocDir = "/usr/share/doc/trestle"

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

// writeManPages writes every page into dir and returns how many. Each
// page's header names its command (TRESTLE\-FDB\-SHOW); trestle(8) has the
// sections an operator looks for besides (manRoot); a document of docs/ a
// page names is named where docDir holds it.
func writeManPages(root *cobra.Command, dir string, date time.Time, docDir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	root.DisableAutoGenTag = true
	markdownLong(root)
	docRef := regexp.MustCompile(`docs/((?:[a-z0-9-]|\\-)+\.md)`)
	docs := roff(strings.TrimSuffix(docDir, "/")) + "/$1"
	var write func(c *cobra.Command) error
	write = func(c *cobra.Command) error {
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				if err := write(sub); err != nil {
					return err
				}
			}
		}
		hdr := &doc.GenManHeader{Section: "8", Date: &date, Source: "trestle " + version, Manual: "trestle manual"}
		var b bytes.Buffer
		if err := doc.GenMan(c, hdr, &b); err != nil {
			return fmt.Errorf("man page of %s: %w", c.CommandPath(), err)
		}
		page := b.String()
		if !c.HasParent() {
			page = manRoot(c, page, docDir)
		} else if slices.Contains(configCommands, c.CommandPath()) {
			page = seeAlso(page, "trestle.toml(5)")
		}
		page = docRef.ReplaceAllString(page, docs)
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".8"
		return os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644)
	}
	if err := write(root); err != nil {
		return 0, err
	}
	page := strings.NewReplacer("@DATE@", date.Format("Jan 2006"), "@VERSION@", version, "@KEYS@", roffKeys(), "@DOCS@", roff(docDir)).Replace(tomlPage)
	page = docRef.ReplaceAllString(page, docs)
	if err := os.WriteFile(filepath.Join(dir, "trestle.toml.5"), []byte(page), 0o644); err != nil {
		return 0, err
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.[58]"))
	return len(pages), err
}

// configCommands read a config file, or take its keys: their pages see
// also trestle.toml(5).
var configCommands = []string{"trestle run", "trestle check", "trestle reload", "trestle port add"}

// manRoot adds to trestle(8) what cobra's page lacks: a SYNOPSIS of every
// command, EXIT STATUS, ENVIRONMENT, FILES, and a SEE ALSO of trestle.toml(5)
// and every command's page.
func manRoot(root *cobra.Command, page, docDir string) string {
	var syn strings.Builder
	syn.WriteString(".SH SYNOPSIS\n")
	also := []string{`\fBtrestle.toml\fP(5)`}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasParent() && c.Runnable() {
			fmt.Fprintf(&syn, ".B %s\n.br\n", roff(strings.TrimSuffix(c.UseLine(), " [flags]")))
		}
		if c.HasParent() {
			also = append(also, fmt.Sprintf(`\fB%s\fP(8)`, roff(strings.ReplaceAll(c.CommandPath(), " ", "-"))))
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
	syn.WriteString(".PP\nEach command takes the flags its page lists, and every one \\fB\\-\\-socket\\fP and \\fB\\-\\-help\\fP.\n")
	if i, j := strings.Index(page, ".SH SYNOPSIS\n"), strings.Index(page, ".SH DESCRIPTION\n"); i >= 0 && j > i {
		page = page[:i] + syn.String() + "\n" + page[j:]
	}

	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	for _, s := range exitStatuses {
		fmt.Fprintf(&b, ".TP\n.B %d\n%s\n", s.Code, roff(sentence(s.Meaning)))
	}
	b.WriteString(".SH ENVIRONMENT\n")
	fmt.Fprintf(&b, ".TP\n.B TRESTLE_SOCKET\n%s\n", roff("The daemon's control socket, where --socket does not name one: the socket the commands talk to, and the one trestle run listens on, over the config file's [daemon] socket."))
	fmt.Fprintf(&b, ".TP\n.B COLUMNS\n%s\n", roff("The width of trestle stat's plot on a terminal."))
	b.WriteString(".SH FILES\n")
	for _, f := range []struct{ path, what string }{
		{"/etc/trestle/trestle.toml", "The config file the systemd unit runs the daemon with (trestle.toml(5))."},
		{ctl.DefaultSocket, "The daemon's control socket, unless [daemon] socket, --socket or TRESTLE_SOCKET name another."},
		{instance.StateRoot + "/", "What each daemon must remember across a restart, a directory each (named by its network namespace and socket): the veth peers it changed and how they were, the ports added at run time. A tmpfs: it goes at reboot, as the pinned datapath does."},
		{instance.PinRoot + "/", "The pinned datapath of each daemon run with persist, a directory each, named as its state directory: it forwards while no daemon runs, and trestle down removes it."},
		{strings.TrimSuffix(docDir, "/") + "/", "The documents: README.md, and configuration.md, operations.md, troubleshooting.md and the others the pages name."},
	} {
		fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", roff(f.path), roff(f.what))
	}
	// SEE ALSO: the file's page and every command's, not only the
	// top-level ones cobra lists.
	if i := strings.Index(page, ".SH SEE ALSO\n"); i >= 0 {
		page = page[:i]
	}
	return page + b.String() + ".SH SEE ALSO\n" + strings.Join(also, ", ") + "\n"
}

// seeAlso puts ref (name(section)) first in the page's SEE ALSO.
func seeAlso(page, ref string) string {
	name, sec, _ := strings.Cut(strings.TrimSuffix(ref, ")"), "(")
	entry := fmt.Sprintf("\\fB%s(%s)\\fP", roff(name), sec)
	if i := strings.Index(page, ".SH SEE ALSO\n"); i >= 0 {
		i += len(".SH SEE ALSO\n")
		return page[:i] + entry + ", " + page[i:]
	}
	return page + ".SH SEE ALSO\n" + entry + "\n"
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
			out = append(out, markdownText(lines[i]))
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

// markdownText is a line of help as Markdown text: a bracket is a
// bracket ("[[bridge.port]] (docs/configuration.md)" is no link).
func markdownText(s string) string {
	return strings.NewReplacer("[", `\[`, "]", `\]`).Replace(s)
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
			items = append(items, fmt.Sprintf("- `%s`: %s", m[1], markdownText(m[2])))
		case len(l)-len(strings.TrimLeft(l, " ")) > indent && len(items) > 0:
			items[len(items)-1] += " " + markdownText(trimmed)
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

// sentence is a meaning of exitStatuses as the manual writes it: a
// capital first and a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
