package undo

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/synchook/synchook/internal/jsonscan"
)

// decodeJSON decodes one JSON value (numbers as json.Number); a plain string literal
// (jsonscan.PlainText) is read without a decoder (most undo values are label values).
func decodeJSON(doc []byte) (any, error) {
	if text, plain := jsonscan.PlainText(doc); plain {
		return string(text), nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}
