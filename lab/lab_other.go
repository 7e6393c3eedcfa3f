//go:build !linux

package lab

import (
	"context"
	"errors"
)

// Run needs Linux network namespaces.
func Run(ctx context.Context, opt Options) error {
	return errors.New("lab: network namespaces need Linux")
}

// lab is the Linux lab's state; elsewhere there is none.
type lab struct{}
