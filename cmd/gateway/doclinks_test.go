package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// markdownFiles returns the repository's Markdown files, relative to root, leaving
// out hidden directories, testdata and node_modules.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

var (
	// mdLinkRE finds inline links and images: [text](target) and ![alt](target).
	mdLinkRE = regexp.MustCompile(`\[[^\]]*\]\(([^()\s]+)\)`)
	// codeSpanRE finds inline code, whose brackets are no links.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	// headingLinkRE keeps the text of a link inside a heading.
	headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// markdownLink is one relative link of a Markdown file.
type markdownLink struct {
	line   int
	target string
}

// scanMarkdown returns the anchors of a Markdown file's headings and its links, both
// outside fenced code blocks.
func scanMarkdown(text string) (map[string]bool, []markdownLink) {
	anchors, seen := map[string]bool{}, map[string]int{}
	var links []markdownLink
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := regexp.MustCompile(`^#{1,6} (.*)$`).FindStringSubmatch(line); m != nil {
			a := githubSlug(m[1])
			if n := seen[a]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", a, n)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			links = append(links, markdownLink{line: i + 1, target: m[1]})
		}
	}
	return anchors, links
}

// githubSlug is the anchor GitHub gives a heading: the text of its links kept,
// lower case, every character other than a letter, a digit, a space, - or _
// dropped, spaces turned into -. A repeated anchor gets -1, -2, … (scanMarkdown).
func githubSlug(heading string) string {
	heading = headingLinkRE.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkMarkdownLinks returns one error per relative link of the Markdown files under
// root that names a missing file, or a heading its Markdown file does not have.
func checkMarkdownLinks(root string) ([]error, error) {
	files, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{}
	links := map[string][]markdownLink{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		anchors[f], links[f] = scanMarkdown(string(b))
	}
	var errs []error
	for _, f := range files {
		for _, l := range links[f] {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			target := f
			if path != "" {
				if strings.HasPrefix(path, "/") {
					errs = append(errs, fmt.Errorf("%s:%d: link %q is absolute: write it relative to the file", f, l.line, l.target))
					continue
				}
				target = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if strings.HasPrefix(target, "..") {
					errs = append(errs, fmt.Errorf("%s:%d: link %q leaves the repository", f, l.line, l.target))
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: link %q: no file %s", f, l.line, l.target, target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors[target][anchor] {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", f, l.line, l.target, target, anchor))
			}
		}
	}
	return errs, nil
}

// TestMarkdownLinks: every relative link between the repository's Markdown files
// names a file that exists and, with an anchor, a heading of that file.
func TestMarkdownLinks(t *testing.T) {
	files, err := markdownFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("found only %d Markdown files: %v", len(files), files)
	}
	errs, err := checkMarkdownLinks(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		t.Error(err)
	}
}

// TestMarkdownLinkCheckFails: the check finds a missing file, a missing heading and
// a heading that exists only once more than it is written; GitHub's slugs drop
// punctuation and number repeated headings.
func TestMarkdownLinkCheckFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n## Load scenarios: `cmd/loadgen`\n\n## Notes\n\n## Notes\n\n"+
		"[ok](sub/DOC.md#a-b_c) [ok](#load-scenarios-cmdloadgen) [ok](#notes-1) [ok](sub/)\n"+
		"[gone](sub/NONE.md) [bad anchor](sub/DOC.md#nowhere) [third](#notes-2)\n"+
		"```\n[in a fence](missing.md)\n```\n`[in code](missing.md)`\n")
	write("sub/DOC.md", "# A, b_c!\n\n[up](../README.md#top)\n")
	errs, err := checkMarkdownLinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`README.md:10: link "sub/NONE.md": no file sub/NONE.md`,
		`README.md:10: link "sub/DOC.md#nowhere": sub/DOC.md has no heading whose anchor is #nowhere`,
		`README.md:10: link "#notes-2": README.md has no heading whose anchor is #notes-2`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
