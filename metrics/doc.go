// Package metrics exposes synchook's Prometheus metrics through controller-runtime's metrics
// registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry) and serves them on their own
// plain-HTTP address at /metrics.
//
// Metrics (all prefixed synchook_):
//
//	requests_total{transport,hook_type,gvk,result}      counter; result is patched, unchanged,
//	                                                     refused, invalid, overloaded or failed
//	request_duration_seconds{transport,hook_type,gvk}   histogram of whole requests
//	hook_duration_seconds{hook,hook_type}               histogram of each hook call
//	hook_failures_total{hook,hook_type,reason}          counter; reason is error or panic
//	patch_operations_total{hook_type,gvk}               counter of JSON Patch operations sent
//	guard_rejections_total{hook_type,gvk}               counter of protected-field changes refused
//	inflight_requests{transport}                        gauge
//	certificate_expiry_timestamp_seconds                gauge, Unix time of the serving cert's NotAfter
//
// Label values are hook names, hook types and GVKs that the registry serves (any other GVK is
// "other"), never object data. The package also logs one clear line when a hook has failed
// FailingHookThreshold times in a row, and again every FailingHookThreshold failures after.
package metrics
