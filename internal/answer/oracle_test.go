package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// WholeAnswer is the answer builder this package had before Of: both documents decoded whole
// into generic values and walked along the Go type from the root. It is the oracle of
// FuzzAnswer (and of nothing in production).
func WholeAnswer(obj any, request, hooked []byte) ([]byte, error) {
	t := reflect.TypeOf(obj)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		return hooked, nil
	}
	before, err := decodeWhole(request)
	if err != nil {
		return nil, fmt.Errorf("decode request object: %w", err)
	}
	after, err := decodeWhole(hooked)
	if err != nil {
		return nil, fmt.Errorf("decode hooked object: %w", err)
	}
	beforeObj, _ := before.(map[string]any)
	afterObj, ok := after.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("hooked object is %T, want a JSON object", after)
	}
	return appendValue(nil, structObject(t, beforeObj, afterObj))
}

// decodeWhole decodes a whole document generically, numbers as json.Number.
func decodeWhole(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
