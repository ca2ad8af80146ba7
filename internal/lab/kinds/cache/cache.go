// Package cache is the lab's address caching kind: RFC 2889 5.7.
package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestCores) }

// Kind is RFC 2889's address caching capacity (5.7), once a unit on
// a learning bridge (methods.go has its trials): the most addresses tried
// is Max.
type Kind struct{ Max int }

func (Kind) Name() string { return lab.TestCache }

func (k Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, MaxEntries: 2 * k.Max}
}

func (Kind) Estimate(lab.Scenario, lab.Spec) time.Duration { return 60 * time.Second }

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("address caching, up to %d addresses", k.Max))
	n, err := u.Rig.AddressCaching(ctx, k.Max, 100e3, s.Timing, func(n int, ok bool) {
		u.Status(fmt.Sprintf("address caching: %d addresses %s", n, lab.PassWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = lab.TestCache, "learned at 100k/s", float64(n), "addresses"
	if n == k.Max {
		r.Note = "held every address tried"
	}
	u.Add(r)
	return nil
}
