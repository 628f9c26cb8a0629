package bridge

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestPluginAddresses(t *testing.T) {
	cases := []struct {
		name, addr, advertised, listen string
	}{
		{"localhost is registered and bound as 127.0.0.1", "localhost:14000", "127.0.0.1:14000", "127.0.0.1:14000"},
		{"an empty host listens everywhere and registers 127.0.0.1", ":14000", "127.0.0.1:14000", ":14000"},
		{"0.0.0.0 listens everywhere and registers 127.0.0.1", "0.0.0.0:14001", "127.0.0.1:14001", "0.0.0.0:14001"},
		{"[::] listens everywhere and registers 127.0.0.1", "[::]:14000", "127.0.0.1:14000", "[::]:14000"},
		{"an IPv4 literal is kept", "10.1.2.3:14000", "10.1.2.3:14000", "10.1.2.3:14000"},
		{"an IPv6 literal is kept", "[::1]:14000", "[::1]:14000", "[::1]:14000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adv, listen, err := pluginAddresses(t.Context(), tc.addr)
			if err != nil || adv != tc.advertised || listen != tc.listen {
				t.Errorf("pluginAddresses(%q) = %q, %q, %v; want %q, %q", tc.addr, adv, listen, err, tc.advertised, tc.listen)
			}
		})
	}
	for _, bad := range []string{"localhost", "localhost:http", "localhost:70000"} {
		if _, _, err := pluginAddresses(t.Context(), bad); err == nil {
			t.Errorf("pluginAddresses(%q): no error", bad)
		}
	}
}

func TestWithBoundPortReplacesPortZero(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}
	for in, want := range map[string]string{"127.0.0.1:0": "127.0.0.1:40123", "127.0.0.1:14000": "127.0.0.1:14000"} {
		if got, err := withBoundPort(in, bound); err != nil || got != want {
			t.Errorf("withBoundPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestDialTargetSkipsTheResolverForLocalhost(t *testing.T) {
	for in, want := range map[string]string{"localhost:10099": "127.0.0.1:10099", "10.0.0.1:10099": "10.0.0.1:10099", "vcluster:10099": "vcluster:10099"} {
		if got := dialTarget(in); got != want {
			t.Errorf("dialTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetDefaultsTakesZeroAndNegativeAsUnset(t *testing.T) {
	tests := []struct {
		name string
		give Options
		want Options
	}{
		{
			name: "zero fields get their defaults",
			want: Options{Name: DefaultName, VClusterAddress: DefaultVClusterAddress, RequestTimeout: DefaultRequestTimeout, PollInterval: DefaultPollInterval, MaxBackoff: DefaultMaxBackoff, MaxMessageBytes: DefaultMaxMessageBytes},
		},
		{
			name: "negative durations and sizes get their defaults",
			give: Options{RequestTimeout: -1, PollInterval: -time.Second, MaxBackoff: -1, MaxMessageBytes: -1},
			want: Options{Name: DefaultName, VClusterAddress: DefaultVClusterAddress, RequestTimeout: DefaultRequestTimeout, PollInterval: DefaultPollInterval, MaxBackoff: DefaultMaxBackoff, MaxMessageBytes: DefaultMaxMessageBytes},
		},
		{
			name: "set fields are kept",
			give: Options{Name: "n", VClusterAddress: "a:1", RequestTimeout: 1, PollInterval: 2, MaxBackoff: 3, MaxMessageBytes: 4},
			want: Options{Name: "n", VClusterAddress: "a:1", RequestTimeout: 1, PollInterval: 2, MaxBackoff: 3, MaxMessageBytes: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.give
			got.setDefaults()
			got.Log = logr.Logger{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("setDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Options of every package leave a zero Log as it is: logr's zero Logger is logr.Discard().
func TestTheZeroLoggerIsDiscard(t *testing.T) {
	if (logr.Logger{}) != logr.Discard() || !(logr.Logger{}).IsZero() {
		t.Fatal("logr.Logger{} is not logr.Discard(): the Options' \"Default logr.Discard()\" needs setting again")
	}
}
