//go:build !linux

package testrepo

import "os"

// statOf records the modification time only: git finds the other fields
// changed and reads the file once to see that it is not.
func statOf(fi os.FileInfo) stat { return statFromInfo(fi) }
