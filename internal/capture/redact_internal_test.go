package capture

import "testing"

func TestMapUndoMapsTheSecretValuesItRecords(t *testing.T) {
	m := mapper{
		data: func(v string) string { return "D(" + v + ")" },
		str:  func(v string) string { return "S(" + v + ")" },
	}
	tests := []struct {
		name, undo, want string
	}{
		{
			name: "a data value and a stringData value are mapped, a label is kept",
			undo: `[{"path":"/data/password","hooked":"aGk=","original":"b2xk"},{"path":"/stringData/user","original":"<admin>"},{"path":"/metadata/labels/app","hooked":"a","original":"b"}]`,
			want: `[{"path":"/data/password","hooked":"D(aGk=)","original":"D(b2xk)"},{"path":"/stringData/user","original":"S(<admin>)"},{"path":"/metadata/labels/app","hooked":"a","original":"b"}]`,
		},
		{
			name: "an undo that records no Secret value is kept as written",
			undo: `[{"path":"/spec/x","hooked":1}]`,
			want: `[{"path":"/spec/x","hooked":1}]`,
		},
		{
			name: "a value that is no undo array is mapped whole",
			undo: `{not json`,
			want: `S({not json)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mapUndo(tt.undo, m); got != tt.want {
				t.Errorf("mapUndo(%s)\n got %s\nwant %s", tt.undo, got, tt.want)
			}
		})
	}
}
