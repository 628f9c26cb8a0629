package bridge

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// loopback is what "localhost" and an unspecified host stand for: vcluster and the plugin
// share the pod's network, and an IP literal spares vcluster a DNS lookup on every call.
const loopback = "127.0.0.1"

// pluginAddresses returns the address to register with vcluster (an IP literal) and the one to
// listen on, for the plugin address addr (host:port):
//
//	localhost:14000  → register 127.0.0.1:14000, listen 127.0.0.1:14000
//	:14000, 0.0.0.0:14000, [::]:14000 → register 127.0.0.1:14000, listen as given
//	10.1.2.3:14000, [::1]:14000 → both as given
//	plugin.example:14000 → resolved once; both the first address (IPv4 preferred)
func pluginAddresses(ctx context.Context, addr string) (advertised, listen string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("vcluster plugin address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("vcluster plugin address %q: port must be 0-65535", addr)
	}
	if host == "localhost" {
		a := net.JoinHostPort(loopback, port)
		return a, a, nil
	}
	if host == "" {
		return net.JoinHostPort(loopback, port), addr, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return net.JoinHostPort(loopback, port), addr, nil
		}
		return addr, addr, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return "", "", fmt.Errorf("vcluster plugin address %q: resolve %s: %w", addr, host, err)
	}
	ip := ips[0].IP
	for _, a := range ips {
		if a.IP.To4() != nil {
			ip = a.IP
			break
		}
	}
	a := net.JoinHostPort(ip.String(), port)
	return a, a, nil
}

// withBoundPort replaces port 0 in advertised with the port the listener got.
func withBoundPort(advertised string, bound net.Addr) (string, error) {
	host, port, err := net.SplitHostPort(advertised)
	if err != nil {
		return "", fmt.Errorf("vcluster plugin address %q: %w", advertised, err)
	}
	if port != "0" {
		return advertised, nil
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("vcluster plugin listener: address %s is not TCP", bound)
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port)), nil
}

// dialTarget returns the gRPC target for vcluster's address: "localhost" becomes 127.0.0.1 so
// that no resolver runs; anything else is dialled as given.
func dialTarget(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
		return net.JoinHostPort(loopback, port)
	}
	return addr
}
