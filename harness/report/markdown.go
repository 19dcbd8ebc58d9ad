package report

import (
	"html"
	"regexp"
	"strings"
)

// markdownToHTML renders the small Markdown subset the summary writers
// produce (headings, "- " bullets, pipe tables, `code`, **bold**) so
// report.html shows exactly the tables of online_summary.md and
// offline_summary.md instead of a second implementation of them.
// Headings are shifted down by shift levels to nest under the report's own.
func markdownToHTML(md string, shift int) string {
	var b strings.Builder
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	inList := false
	closeList := func() {
		if inList {
			b.WriteString("</ul>\n")
			inList = false
		}
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " ")
		switch {
		case strings.HasPrefix(line, "#"):
			closeList()
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			tag := "h" + string(rune('0'+min(hashes+shift, 6)))
			b.WriteString("<" + tag + ">" + inlineMarkdown(strings.TrimSpace(line[hashes:])) + "</" + tag + ">\n")
		case strings.HasPrefix(line, "- "):
			if !inList {
				b.WriteString("<ul class=\"meta\">\n")
				inList = true
			}
			b.WriteString("<li>" + inlineMarkdown(line[2:]) + "</li>\n")
		case strings.HasPrefix(line, "|"):
			closeList()
			j := i
			for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|") {
				j++
			}
			b.WriteString(tableToHTML(lines[i:j]))
			i = j - 1
		case strings.TrimSpace(line) == "":
			closeList()
		default:
			closeList()
			b.WriteString("<p>" + inlineMarkdown(line) + "</p>\n")
		}
	}
	closeList()
	return b.String()
}

// tableToHTML turns a pipe table (header, alignment row, body) into HTML.
func tableToHTML(rows []string) string {
	if len(rows) < 2 {
		return ""
	}
	header := splitRow(rows[0])
	var aligns []string
	for _, spec := range splitRow(rows[1]) {
		spec = strings.TrimSpace(spec)
		switch {
		case strings.HasSuffix(spec, ":") && strings.HasPrefix(spec, ":"):
			aligns = append(aligns, "c")
		case strings.HasSuffix(spec, ":"):
			aligns = append(aligns, "r")
		default:
			aligns = append(aligns, "l")
		}
	}
	class := func(i int) string {
		if i < len(aligns) {
			return ` class="` + aligns[i] + `"`
		}
		return ""
	}
	var b strings.Builder
	b.WriteString("<div class=\"scroll\"><table>\n<thead><tr>")
	for i, h := range header {
		b.WriteString("<th" + class(i) + ">" + inlineMarkdown(h) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range rows[2:] {
		cells := splitRow(row)
		rowClass := ""
		if strings.Contains(row, "INVALID") {
			rowClass = ` class="invalid"`
		}
		b.WriteString("<tr" + rowClass + ">")
		for i, c := range cells {
			b.WriteString("<td" + class(i) + ">" + inlineMarkdown(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>\n")
	return b.String()
}

// splitRow splits "| a | b \| c |" into cells, honouring escaped pipes.
func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

var (
	codeSpan = regexp.MustCompile("`([^`]*)`")
	boldSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// inlineMarkdown escapes text and renders `code` and **bold**.
func inlineMarkdown(s string) string {
	s = html.EscapeString(s)
	s = codeSpan.ReplaceAllString(s, "<code>$1</code>")
	return boldSpan.ReplaceAllString(s, "<strong>$1</strong>")
}
