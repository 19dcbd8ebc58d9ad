package phase

import (
	"reflect"
	"testing"
)

type logObserver struct {
	name string
	log  *[]string
}

func (o logObserver) Begin(p Phase, b *Batch) { *o.log = append(*o.log, o.name+"+"+p.String()) }
func (o logObserver) End(p Phase, b *Batch)   { *o.log = append(*o.log, o.name+"-"+p.String()) }

func TestMultiNests(t *testing.T) {
	var log []string
	if Multi() != nil || Multi(nil, nil) != nil {
		t.Fatal("Multi of nothing must be nil, so the engine skips the calls")
	}
	one := logObserver{"a", &log}
	if Multi(nil, one) != Observer(one) {
		t.Error("Multi of one observer should be that observer")
	}
	m := Multi(one, nil, logObserver{"b", &log})
	m.Begin(Forward, &Batch{})
	m.End(Forward, &Batch{})
	want := []string{"a+forward", "b+forward", "b-forward", "a-forward"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("calls %v, want %v", log, want)
	}
}

func TestBatchKind(t *testing.T) {
	cases := []struct {
		b    Batch
		want string
	}{
		{Batch{}, ""},
		{Batch{NumSeqs: 1, NumPrefillTokens: 9}, "prefill"},
		{Batch{NumSeqs: 2, NumDecodeSeqs: 2}, "decode"},
		{Batch{NumSeqs: 3, NumPrefillTokens: 9, NumDecodeSeqs: 2}, "mixed"},
	}
	for _, tc := range cases {
		if got := tc.b.Kind(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.b, got, tc.want)
		}
	}
	if Phase(200).String() != "unknown" || Emit.String() != "emit" {
		t.Error("phase names")
	}
}
