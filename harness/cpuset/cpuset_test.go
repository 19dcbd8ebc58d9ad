package cpuset

import (
	"fmt"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"0-3,8", "[0 1 2 3 8]", false},
		{"1", "[1]", false},
		{"3,1,1-2", "[1 2 3]", false},
		{"", "", true},
		{"a", "", true},
		{"3-1", "", true},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || (err == nil && fmt.Sprint(got) != tc.want) {
			t.Errorf("%q: %v %v", tc.in, got, err)
		}
	}
}

func TestFormatCPUListRoundTrip(t *testing.T) {
	for _, in := range []string{"0", "0-3", "0-1,4,6-7", "1,3,5"} {
		list, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Format(list); got != in {
			t.Errorf("Format(%v) = %q, want %q", list, got, in)
		}
	}
}
