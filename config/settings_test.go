package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/synchook/synchook/config"
)

// tenantSettings is the shape of a Go hook's settings in these tests.
type tenantSettings struct {
	Tenant   string         `json:"tenant"`
	Replicas int            `json:"replicas"`
	Enabled  bool           `json:"enabled"`
	Limits   map[string]int `json:"limits,omitempty"`
	Nested   *struct {
		Key string `json:"key"`
	} `json:"nested,omitempty"`
	embeddedSettings
}

type embeddedSettings struct {
	Region string `json:"region"`
}

func TestDecodeSettingsKeepsTypesAndSitsNextToHooks(t *testing.T) {
	c, err := config.Parse([]byte(`
hooks:
  - resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {labels: {replicas: "2"}}
settings:
  tenant: team-a
  replicas: 3
  enabled: true
  limits: {cpu: 2}
  region: eu
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Hooks[0].Labels.Labels["replicas"]; got != "2" {
		t.Errorf("labels replicas %q, want \"2\"", got)
	}
	var s tenantSettings
	if err := c.DecodeSettings(&s); err != nil {
		t.Fatal(err)
	}
	want := tenantSettings{Tenant: "team-a", Replicas: 3, Enabled: true, Limits: map[string]int{"cpu": 2}, embeddedSettings: embeddedSettings{Region: "eu"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings %+v, want %+v", s, want)
	}
}

func TestDecodeSettingsWithoutHooks(t *testing.T) {
	c, err := config.Parse([]byte("settings: {tenant: team-b, replicas: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hooks) != 0 {
		t.Errorf("hooks %v, want none", c.Hooks)
	}
	var s tenantSettings
	if err := c.DecodeSettings(&s); err != nil {
		t.Fatal(err)
	}
	if s.Tenant != "team-b" || s.Replicas != 1 {
		t.Errorf("settings %+v, want tenant team-b, replicas 1", s)
	}
}

func TestDecodeSettingsAbsentKeepsDefaults(t *testing.T) {
	for _, doc := range []string{"hooks: []\n", "settings:\n", "settings: null\n"} {
		c, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		s := tenantSettings{Tenant: "default"}
		if err := c.DecodeSettings(&s); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if s.Tenant != "default" {
			t.Errorf("%q: tenant %q, want the default kept", doc, s.Tenant)
		}
	}
}

func TestDecodeSettingsIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{
			name: "an unknown key is named with the valid ones",
			doc:  "settings: {tenat: team-a}\n",
			want: []string{`settings: unknown field "tenat" (valid: enabled, limits, nested, region, replicas, tenant)`},
		},
		{
			name: "a nested unknown key is named at its parent",
			doc:  "settings: {nested: {kye: x}}\n",
			want: []string{`settings.nested: unknown field "kye" (valid: key)`},
		},
		{
			name: "keys are case-sensitive",
			doc:  "settings: {Tenant: team-a}\n",
			want: []string{`settings: unknown field "Tenant"`},
		},
		{
			name: "a value of the wrong shape",
			doc:  "settings: {replicas: three}\n",
			want: []string{"settings.replicas: a string, want a number"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Parse: %v (settings are checked by DecodeSettings, not Parse)", err)
			}
			var s tenantSettings
			err = c.DecodeSettings(&s)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDuplicateSettingsKeysAreRefusedByParse(t *testing.T) {
	_, err := config.Parse([]byte("settings: {tenant: a, tenant: b}\n"))
	if err == nil || !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("error %v, want one wrapping ErrInvalid", err)
	}
}
