package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	const pass = `{"Action":"pass","Package":"p","Test":"TestA"}` + "\n"
	tests := []struct {
		name   string
		in     string
		min    int
		status int
		says   string
	}{
		{"all pass", pass, 1, 0, "1 passed, 0 failed, 0 skipped"},
		{"too few ran", pass, 2, 1, "only 1 tests passed; this step needs at least 2"},
		{"nothing ran", `{"Action":"skip","Package":"p"}` + "\n", 1, 1, "0 passed, 0 failed, 0 skipped"},
		{"a skip on the list", pass + `{"Action":"skip","Package":"p","Test":"TestHelperProcess"}` + "\n", 1, 0, "1 passed, 0 failed, 1 skipped"},
		{"a skip not on the list", pass + `{"Action":"output","Package":"p","Test":"TestDB","Output":"no database\n"}` + "\n" +
			`{"Action":"skip","Package":"p","Test":"TestDB"}` + "\n", 1, 1, "SKIPPED, not on the allowed list: p TestDB: no database"},
		{"a failure prints its output", pass + `{"Action":"output","Package":"p","Test":"TestB","Output":"boom\n"}` + "\n" +
			`{"Action":"fail","Package":"p","Test":"TestB"}` + "\n", 1, 1, "--- FAIL p TestB\nboom"},
		{"a package that does not build", pass + `{"Action":"build-output","Output":"x.go:1: syntax error\n"}` + "\n" +
			`{"Action":"build-fail"}` + "\n", 1, 1, "x.go:1: syntax error"},
		{"a package that panics outside a test", pass + `{"Action":"fail","Package":"q"}` + "\n", 1, 1, "failed: q"},
	}
	rules := []allowRule{{re: regexp.MustCompile(`^p TestHelperProcess$`)}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			status := check(strings.NewReader(tt.in), &out, rules, tt.min, false)
			assert.Equal(t, tt.status, status, out.String())
			assert.Contains(t, out.String(), tt.says)
		})
	}
}
