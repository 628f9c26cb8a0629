package config_test

// The policy: hooks of these tests need the compiler that config/policy registers, as the
// synchook binary links it.
import _ "github.com/synchook/synchook/config/policy"
