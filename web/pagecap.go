package web

import "fmt"

// What one run page renders at most: the spec is at most
// schema.MaxResourceBytes of JSON, and a log record up to the runner's
// read buffer (256 KiB), so a page of pageLogLines records could otherwise
// be a hundred megabytes.
const (
	// pageSpecBytes caps the normalized spec shown on a run page.
	pageSpecBytes = 256 << 10
	// pageLogBytes caps the log text shown on one run page.
	pageLogBytes = 1 << 20
)

// capSpec cuts spec to pageSpecBytes; full is its whole size when cut.
func capSpec(spec string) (shown string, full int) {
	if len(spec) <= pageSpecBytes {
		return spec, 0
	}
	return validUTF8Prefix(spec, pageSpecBytes), len(spec)
}

// capLogLines keeps the lines that fit in pageLogBytes (at least one, its
// text cut when it alone is too long); more reports that lines were left
// for the next page.
func capLogLines(lines []LogLine) (kept []LogLine, more bool) {
	total := 0
	for i, l := range lines {
		if total+len(l.Text) <= pageLogBytes {
			total += len(l.Text)
			continue
		}
		if i > 0 {
			return lines[:i], true
		}
		cut := validUTF8Prefix(l.Text, pageLogBytes)
		l.Text = cut + fmt.Sprintf(" … [line truncated: %d more bytes in the raw text]", len(l.Text)-len(cut))
		return []LogLine{l}, len(lines) > 1
	}
	return lines, false
}

// validUTF8Prefix cuts s to at most n bytes without splitting a character.
func validUTF8Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
