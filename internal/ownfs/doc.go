// Package ownfs says who owns a file: the one place where synchook asks the system for a
// file's owner uid (capture's directory and records, the local undo key file), so that
// "a file or directory of this user's own" means the same everywhere.
package ownfs
