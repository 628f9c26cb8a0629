package undo

import "github.com/synchook/synchook/internal/jsondoc"

// decodeJSON decodes one JSON value as the documents Apply edits hold it (jsondoc.Decode).
func decodeJSON(doc []byte) (any, error) { return jsondoc.Decode(doc) }
