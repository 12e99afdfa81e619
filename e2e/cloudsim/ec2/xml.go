package ec2

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
)

// xmlns is the namespace of every EC2 response document.
const xmlns = "http://ec2.amazonaws.com/doc/2016-11-15/"

// A node is an element of a response document: a leaf with text, or an
// element with children. Lists are elements whose children are all named
// "item", as in the EC2 API Reference samples.
type node struct {
	name     string
	text     string
	leaf     bool
	children []node
}

// el returns an element with children; nil-named children are skipped.
func el(name string, children ...node) node {
	kids := children[:0:0]
	for _, c := range children {
		if c.name != "" {
			kids = append(kids, c)
		}
	}
	return node{name: name, children: kids}
}

// leaf returns a text element.
func leaf(name, text string) node { return node{name: name, text: text, leaf: true} }

// opt returns a text element, or nothing when text is empty.
func opt(name, text string) node {
	if text == "" {
		return node{}
	}
	return leaf(name, text)
}

func intLeaf(name string, v int) node { return leaf(name, strconv.Itoa(v)) }

func boolLeaf(name string, v bool) node { return leaf(name, strconv.FormatBool(v)) }

// items returns a list element of "item" entries.
func items(name string, entries ...node) node {
	for i := range entries {
		entries[i].name = "item"
	}
	return el(name, entries...)
}

// tagSet renders tags as EC2's tagSet.
func tagSet(tags map[string]string) node {
	var entries []node
	for _, k := range sortedKeys(tags) {
		entries = append(entries, el("item", leaf("key", k), leaf("value", tags[k])))
	}
	return items("tagSet", entries...)
}

func (n node) write(b *bytes.Buffer) {
	b.WriteByte('<')
	b.WriteString(n.name)
	b.WriteByte('>')
	if n.leaf {
		_ = xml.EscapeText(b, []byte(n.text))
	} else {
		for _, c := range n.children {
			c.write(b)
		}
	}
	b.WriteString("</")
	b.WriteString(n.name)
	b.WriteByte('>')
}

// respond writes <ActionResponse xmlns=...> with a requestId and children.
func respond(w http.ResponseWriter, action, requestID string, children ...node) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<" + action + "Response xmlns=\"" + xmlns + "\">")
	leaf("requestId", requestID).write(&b)
	for _, c := range children {
		if c.name != "" {
			c.write(&b)
		}
	}
	b.WriteString("</" + action + "Response>")
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write(b.Bytes())
}

// An apiError is an EC2 error: its code, message and HTTP status.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// badRequest is a 400 error, the status EC2 uses for client errors; the
// simulator also answers capacity errors with it, so that the SDK's retryer
// does not retry them (EC2 documents them as server errors).
func badRequest(code, message string) *apiError { return errorf(http.StatusBadRequest, code, message) }

// writeError writes EC2's error document
// (<Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>).
func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	el("Response",
		el("Errors", el("Error", leaf("Code", e.code), leaf("Message", e.message))),
		leaf("RequestID", requestID),
	).write(&b)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write(b.Bytes())
}
