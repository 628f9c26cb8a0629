// Package jsonscan splits JSON documents into their parts without decoding them: the members of
// an object and the elements of an array, as sub-slices of the document. It is the one place in
// synchook that reads JSON by hand; the patch differ, the AdmissionReview reader, the List
// batch and the label/annotation fast path use it where a profile showed that decoding whole
// objects cost more than the work itself.
//
// Every function here but Valid expects valid JSON (check with Valid first) and never panics on
// invalid input, but its answer for invalid input is undefined. It does not unescape values
// (only keys), build trees or know about Kubernetes.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Valid reports whether doc is one valid JSON value, exactly as encoding/json's Valid does
// (strings with invalid UTF-8 and objects with repeated names are valid, as there), with
// jsontext (the JSON v2 prototype of the Go team), which checks about twice as fast. FuzzScan
// checks the two agree.
func Valid(doc []byte) bool {
	return jsontext.Value(doc).IsValid(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

// Member is one member of a JSON object: its key, decoded, and its value as a trimmed sub-slice
// of the document. Start and End are the offsets in the object of the member's first byte (the
// key's opening quote) and just past its value.
type Member struct {
	Key        string
	Value      []byte
	Start, End int
}

// Members returns the members of the JSON object doc, in document order and duplicates
// included, without copying values; offsets are relative to doc. ok is false when doc (after
// leading white space) is not an object.
func Members(doc []byte) (ms []Member, ok bool) {
	return ms, walkMembers(doc, func(lit []byte, m Member) bool {
		if ms == nil {
			ms = make([]Member, 0, 8) // most label and annotation maps: one allocation
		}
		m.Key, _ = String(lit)
		ms = append(ms, m)
		return true
	})
}

// walkMembers calls fn with every member of the JSON object doc as Members gives it, but its
// key as the literal lit (Key unset), until fn returns false. ok is false when doc (after
// leading white space) is not an object.
func walkMembers(doc []byte, fn func(lit []byte, m Member) bool) (ok bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		start := i
		keyEnd := skipString(doc, i)
		lit := doc[i:keyEnd]
		i = skipSpace(doc, keyEnd)
		i = skipSpace(doc, i+1) // ':'
		if i >= len(doc) {
			break
		}
		end := SkipValue(doc, i)
		if !fn(lit, Member{Value: doc[i:end], Start: start, End: end}) {
			break
		}
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ',' {
			break
		}
		i = skipSpace(doc, i+1)
	}
	return true
}

// EachMember calls fn with every member of the JSON object doc, in document order and
// duplicates included, until fn returns false: key is the key's string literal as written
// (quotes and escapes included: PlainText or String gives its text) and value the member's
// value, trimmed; both are sub-slices of doc. It sees the members Members sees, without
// allocating. ok is false when doc (after leading white space) is not an object.
func EachMember(doc []byte, fn func(key, value []byte) bool) (ok bool) {
	if i := skipSpace(doc, 0); i >= len(doc) || doc[i] != '{' {
		return false
	}
	ScanObject(doc, func(key, rest []byte) int {
		end := SkipValue(rest, 0)
		if !fn(key, rest[:end]) {
			return -1
		}
		return end
	})
	return true
}

// ScanObject is EachMember for a reader that reads some values on the way: it calls fn with
// every member's key literal (as EachMember gives it) and rest, the object from the member's
// value on, and fn returns the length of that value: SkipValue(rest, 0) passes over it, and for
// an object value, ScanObject(rest, ...) reads its members and returns its length, so that
// nested objects are scanned once. A negative length stops the scan. ScanObject returns the
// offset in doc just past the object's closing brace (its length when doc starts with it, as
// rest does), or -1 when doc is not an object or fn stopped the scan.
func ScanObject(doc []byte, fn func(key, rest []byte) int) int {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return -1
	}
	i = skipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		keyEnd := skipString(doc, i)
		key := doc[i:keyEnd]
		i = skipSpace(doc, keyEnd)
		i = skipSpace(doc, i+1) // ':'
		if i >= len(doc) {
			break
		}
		n := fn(key, doc[i:])
		if n < 0 {
			return -1
		}
		i = skipSpace(doc, i+min(n, len(doc)-i))
		if i >= len(doc) || doc[i] != ',' {
			break
		}
		i = skipSpace(doc, i+1)
	}
	if i < len(doc) && doc[i] == '}' {
		return i + 1
	}
	return len(doc)
}

// Find returns the value of the last member named key of the object doc (the one
// encoding/json's Unmarshal uses) and how many members have that name; found is false when doc
// is not an object or has no such member.
func Find(doc []byte, key string) (m Member, count int, found bool) {
	walkMembers(doc, func(lit []byte, x Member) bool {
		if text, plain := PlainText(lit); plain && string(text) == key || !plain && keyText(lit) == key {
			x.Key = key
			m, count, found = x, count+1, true
		}
		return true
	})
	return m, count, found
}

// keyText is the text of the key literal lit with escapes or non-ASCII text ("" when it is not
// a string literal).
func keyText(lit []byte) string {
	s, _ := String(lit)
	return s
}

// Elements returns the elements of the JSON array doc, in order, trimmed, without copying them.
// ok is false when doc (after leading white space) is not an array.
func Elements(doc []byte) (els [][]byte, ok bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return nil, false
	}
	i = skipSpace(doc, i+1)
	if i >= len(doc) || doc[i] == ']' {
		return nil, true
	}
	for i < len(doc) {
		end := SkipValue(doc, i)
		els = append(els, doc[i:end])
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ',' {
			break
		}
		i = skipSpace(doc, i+1)
	}
	return els, true
}

// SkipValue returns the index just past the JSON value that starts at data[i].
func SkipValue(data []byte, i int) int {
	if i >= len(data) {
		return len(data)
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = skipString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string literal that starts at data[i] ('"'). It
// jumps from quote to quote (bytes.IndexByte) and only looks closer when a backslash comes
// before the next quote.
func skipString(data []byte, i int) int {
	for i++; i < len(data); {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return len(data)
		}
		b := bytes.IndexByte(data[i:i+q], '\\')
		if b < 0 {
			return i + q + 1
		}
		i += b + 2 // past the backslash and the byte it escapes
	}
	return len(data)
}

// SkipSpace returns the index of the first byte at or after i in data that is not JSON white
// space (len(data) when there is none).
func SkipSpace(data []byte, i int) int { return skipSpace(data, i) }

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// String returns the string the JSON string literal lit denotes, exactly as encoding/json
// decodes it (escapes resolved, invalid UTF-8 replaced by U+FFFD); ok is false when lit is no
// valid string literal. A literal of printable ASCII without escapes is copied as it is; any
// other goes through encoding/json.
func String(lit []byte) (s string, ok bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if text, plain := PlainText(lit); plain {
		return string(text), true
	}
	return decodeString(lit)
}

// decodeString is String's decode of a literal with escapes or non-ASCII text, apart so that
// the plain path allocates only the string (the target of Unmarshal escapes to the heap).
func decodeString(lit []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", false
	}
	return s, true
}

// AppendString appends s as a JSON string literal to b, exactly as encoding/json's Marshal
// encodes it (HTML-safe: <, > and & escaped; invalid UTF-8 as U+FFFD). A string of printable
// ASCII that needs no escape is appended as it is, without allocating; any other goes through
// encoding/json.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			lit, _ := json.Marshal(s) // a string always encodes
			return append(b, lit...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// PlainText returns the text of the JSON string literal lit when it is printable ASCII without
// escapes, as a sub-slice of lit (the literal between its quotes, which is then exactly the
// string it denotes); plain is false for any other literal (decode it with String).
func PlainText(lit []byte) (text []byte, plain bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	inner := lit[1 : len(lit)-1]
	for _, c := range inner {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return inner, true
}

// Lookup returns the value at the reference tokens of an RFC 6901 JSON Pointer (unescaped, as
// patch.ParsePointer gives them; none: doc itself, trimmed) in the JSON document doc: through
// an object by its last member of that key (the one encoding/json's Unmarshal uses), through an
// array by a decimal index. ok is false when a token names nothing. (patch keeps its own lookup:
// its Rebase relies on first-key, untrimmed semantics when it judges a patch sure to apply.)
func Lookup(doc []byte, tokens []string) (value []byte, ok bool) {
	cur := bytes.TrimSpace(doc)
	for _, tok := range tokens {
		switch {
		case len(cur) > 0 && cur[0] == '{':
			m, _, found := Find(cur, tok)
			if !found {
				return nil, false
			}
			cur = m.Value
		case len(cur) > 0 && cur[0] == '[':
			i, isIndex := ArrayIndex(tok)
			els, _ := Elements(cur)
			if !isIndex || i >= len(els) {
				return nil, false
			}
			cur = els[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// ArrayIndex parses an RFC 6901 array index: decimal digits, no leading zero ("0" alone is
// zero), at most 9 of them (no array of a document is that long); no sign, no "-". The one
// rule of what an array index is, for every reader of JSON Pointers (bounds are the caller's).
func ArrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' || len(tok) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// MemberName returns the name that a member's key literal (as EachMember gives it) stands for:
// the literal's text when it has no escapes (no copy), else the decoded string.
func MemberName(key []byte) []byte {
	if text, plain := PlainText(key); plain {
		return text
	}
	s, _ := String(key)
	return []byte(s)
}
