package apitest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// CounterWith returns the value of the counter name whose label has value
// in g (0 when there is none). A failed gather fails t.
func CounterWith(t testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
