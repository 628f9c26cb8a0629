package plugin_test

import (
	"fmt"

	"github.com/synchook/synchook/plugin"
)

// TenantSettings are a hook's own settings, under the config's settings key.
type TenantSettings struct {
	Tenant   string   `json:"tenant"`
	Required []string `json:"required,omitempty"`
	Replicas int      `json:"replicas"`
}

// A hook author's main reads the hook's settings from the same config as synchook's own
// hooks, before registering the hook built from them. Here the config comes from a fake
// environment; a real program uses plugin.UnmarshalConfig on the default Plugin, whose config
// is --config, SYNCHOOK_CONFIG or, under vcluster, PLUGIN_CONFIG.
func ExamplePlugin_UnmarshalConfig() {
	env := map[string]string{"SYNCHOOK_CONFIG": `
settings:
  tenant: team-a
  required: [password]
`}
	p := plugin.New()
	p.Args = []string{"serve"}
	p.Getenv = func(key string) string { return env[key] }

	settings := TenantSettings{Replicas: 1} // defaults: what the config leaves out stays
	if err := p.UnmarshalConfig(&settings); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", settings)

	// Decoding is strict: a misspelt key is an error that names it.
	env["SYNCHOOK_CONFIG"] = "settings: {tennant: team-a}"
	fmt.Println(p.UnmarshalConfig(&settings))
	// Output:
	// {Tenant:team-a Required:[password] Replicas:1}
	// config env SYNCHOOK_CONFIG: invalid synchook config: settings: unknown field "tennant" (valid: replicas, required, tenant)
}
