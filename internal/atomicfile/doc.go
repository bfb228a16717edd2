// Package atomicfile writes files so that a reader, or a process restarted
// after a crash, sees either the old content or the new, never a mix: write a
// temporary file in the same directory, fsync it, rename it over the target,
// then fsync the directory so the rename itself is durable.
package atomicfile
