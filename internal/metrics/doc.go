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
//	undo_rejected_total{reason}                         counter of synchook.io/undo annotations a read
//	                                                     dropped: too_large, clear_text, no_key,
//	                                                     unauthentic, malformed, identity or deadline
//	undo_entries_skipped_total{kind,reason}             counter of undo entries a read left out:
//	                                                     changed, held or no_place
//	loops_detected_total{hook}                          counter of objects an Update chain keeps patching
//	undo_key_fallbacks_total                            counter of plugin v2 starts without the undo key
//	                                                     Secret (host unreachable): no key until a retry
//	certificate_expiry_timestamp_seconds                gauge, Unix time of the serving cert's NotAfter
//	slots_stuck                                         gauge, hook concurrency slots held longer than
//	                                                     the request timeout (WatchSlots): by hooks that
//	                                                     ignore their context, abandoned at the deadline
//
// Every counter is served from the start at zero for the label values known then: at
// registration the reasons of undo_rejected_total, in New those that the registry names (its
// kinds, hook types, hooks and Update chains). docs/sidecar.md documents every counter; a
// test parses it and holds the two together. (builtin's image_unparsable_total{hook} is
// registered by package builtin, per image hook.)
//
// Label values are hook names, hook types and GVKs that the registry serves (any other GVK is
// "other"), never object data. The package also logs one clear line when a hook has failed
// FailingHookThreshold times in a row, and again every FailingHookThreshold failures after.
// SlotCheck is the health check built on the same slots: it fails, and logs one error naming
// the hooks, while every slot has been held longer than DefaultStuckSlotsFactor (3) × the
// request timeout, and logs once when a slot is free again.
package metrics
