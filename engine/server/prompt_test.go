package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestParseTokenIDs checks the token-id scanner against what encoding/json
// makes of the same lists: the ids it accepts, and the message for each way
// a list can be wrong (the number quoted as written).
func TestParseTokenIDs(t *testing.T) {
	s := &Server{cfg: Config{VocabSize: 50257}}
	for _, c := range []struct {
		raw  string
		want []int32
		err  string
	}{
		{raw: `[1,2,3]`, want: []int32{1, 2, 3}},
		{raw: " [ 0 ,\n\t50256\r\n, 7 ] ", want: []int32{0, 50256, 7}},
		{raw: `[-0]`, want: []int32{0}},
		{raw: `[]`, err: "the prompt must not be empty"},
		{raw: `[ ]`, err: "the prompt must not be empty"},
		{raw: `[50257]`, err: "token id 50257 at position 0 is outside the vocabulary [0, 50257)"},
		{raw: `[5,-1]`, err: "token id -1 at position 1 is outside the vocabulary"},
		{raw: `[99999999999999999999]`, err: "token id 99999999999999999999 at position 0 is outside"},
		{raw: `[1.5]`, err: "every id must be an integer"},
		{raw: `[1e3]`, err: "every id must be an integer"},
		{raw: `[1,"a"]`, err: "every id must be an integer"},
		{raw: `[1,[2]]`, err: "every id must be an integer"},
		{raw: `[true]`, err: "every id must be an integer"},
	} {
		got, e := s.parseTokenIDs(json.RawMessage(c.raw))
		switch {
		case c.err == "" && e != nil:
			t.Errorf("%s: %v", c.raw, e)
		case c.err == "" && !slices.Equal(got, c.want):
			t.Errorf("%s: %v, want %v", c.raw, got, c.want)
		case c.err != "" && (e == nil || !strings.Contains(e.Message, c.err)):
			t.Errorf("%s: error %v, want one containing %q", c.raw, e, c.err)
		}
		if c.err == "" { // encoding/json agrees on the accepted lists
			var ref []int32
			if err := json.Unmarshal([]byte(c.raw), &ref); err != nil || !slices.Equal(ref, got) {
				t.Errorf("%s: encoding/json reads %v (%v), the scanner %v", c.raw, ref, err, got)
			}
		}
	}
}
