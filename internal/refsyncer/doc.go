// Package refsyncer is a small, test-only syncer that behaves like vcluster's built-in pod,
// service and secret syncers, so that end-to-end tests can run synchook the way a real syncer
// uses it: through two hooked clients (hookclient.Wrap), one per cluster, and nothing else.
//
// Objects created in the virtual cluster are created in ONE host namespace under the name
// "<name>-x-<namespace>-x-<vcluster name>" (shortened with a hash past 63 characters, as
// vcluster does), with vcluster's bookkeeping: the labels vcluster.loft.sh/managed-by and
// vcluster.loft.sh/namespace, and the annotations vcluster.loft.sh/object-name,
// -object-namespace, -object-uid, -object-kind, -object-host-name and -object-host-namespace.
// Changes to labels, annotations, container images, service ports, selector and type, and
// secret data follow; deleting the virtual object deletes the host object; pod status is
// copied back up to the virtual pod.
//
// Every pass lists both sides (a List is one hooked request per kind) and compares the host
// object as read (after the GetPhysical hooks) with what the virtual object translates to,
// writing only on a difference: a level-triggered syncer, like vcluster's, that polls instead
// of watching. It is deliberately simpler than vcluster: label keys are not rewritten,
// secrets are all synced (vcluster's sync.toHost.secrets.all), service-account token secrets
// and the default/kubernetes service are skipped, and labels and annotations of host objects
// are owned by the syncer (it overwrites what others add on the host, which is why a write
// hook that adds something on the host should come with a GetPhysical hook that hides it).
package refsyncer
