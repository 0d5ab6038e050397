//go:build !unix

package pgembed

import (
	"errors"
	"os"
	"syscall"
)

var errUnsupported = errors.New("the embedded PostgreSQL needs a Unix system: set DATABASE_URL")

type serverUser struct {
	name     string
	switchTo *struct{}
}

const noFollow = 0

func resolveServerUser() (serverUser, error)         { return serverUser{}, errUnsupported }
func (serverUser) sysProcAttr() *syscall.SysProcAttr { return nil }
func (serverUser) own(string) error                  { return errUnsupported }
func (serverUser) ownTree(string) error              { return errUnsupported }
func (serverUser) checkTraverse(string) error        { return errUnsupported }
func lockFile(string) (*os.File, error)              { return nil, errUnsupported }
