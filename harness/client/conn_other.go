//go:build !unix

package client

// alive cannot peek without the unix socket calls: an idle connection the
// server closed is found on the send, and the retry (Client.Do) covers it.
func (cn *conn) alive() bool { return true }
