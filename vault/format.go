package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"strconv"
)

// Ciphertext layout. The term sits in the clear in the header so that Open
// picks the right data key without trying every term, so that a rotation job
// can find rows still under an old term from the bytes alone (TermOf), and so
// that an old term can be proven unused before it is deleted. It needs no
// separate authentication: a changed term selects another key, or none, and
// GCM then fails.
//
//	[0]     format version 0x01
//	[1:5]   key term, big-endian uint32
//	[5:17]  random 96-bit nonce
//	[17:]   AES-256-GCM ciphertext || 16-byte tag
const (
	// KeySize is the size in bytes of the root key and of every data key.
	KeySize = 32
	// Overhead is how many bytes Seal adds to a plaintext.
	Overhead = headerSize + tagSize

	formatVersion byte = 0x01
	nonceSize          = 12
	tagSize            = 16
	headerSize         = 1 + 4 + nonceSize
	// wrapOverhead is the size added by wrap: version, nonce and tag.
	wrapOverhead = 1 + nonceSize + tagSize
)

// CredentialAAD returns the additional data that binds a credential's
// ciphertext to its row: "cred|v1|" + workspaceID + "|" + connectionID. A
// ciphertext copied to another connection or workspace then fails to Open.
// The IDs must not contain '|' (UUIDs do not), or two pairs could collide.
func CredentialAAD(workspaceID, connectionID string) []byte {
	return rowAAD("cred|v1|", workspaceID, connectionID)
}

// TOTPAAD returns the additional data that binds a person's sealed TOTP
// secret to its row: "totp|v1|" + userID + "|" + factorID. The prefix keeps
// it apart from every credential's, so neither kind opens as the other. The
// IDs must not contain '|' (UUIDs do not).
func TOTPAAD(userID, factorID string) []byte {
	return rowAAD("totp|v1|", userID, factorID)
}

// WebhookSecretAAD returns the additional data that binds a workspace's
// sealed webhook secret to its row: "webhook|v1|" + workspaceID + "|" +
// secretID, apart from every credential's and TOTP secret's.
func WebhookSecretAAD(workspaceID, secretID string) []byte {
	return rowAAD("webhook|v1|", workspaceID, secretID)
}

// UpstreamHeadersAAD returns the additional data that binds an upstream
// server's sealed credential headers to its row: "upstream|v1|" +
// workspaceID + "|" + serverID, apart from every other kind's.
func UpstreamHeadersAAD(workspaceID, serverID string) []byte {
	return rowAAD("upstream|v1|", workspaceID, serverID)
}

// rowAAD is prefix + owner + "|" + id.
func rowAAD(prefix, owner, id string) []byte {
	b := make([]byte, 0, len(prefix)+len(owner)+1+len(id))
	b = append(b, prefix...)
	b = append(b, owner...)
	b = append(b, '|')
	return append(b, id...)
}

// TermOf returns the key term recorded in a ciphertext's header, without
// decrypting it. The store uses it to fill the key_term column that mirrors
// the header; the header stays authoritative. It returns ErrMalformed for
// anything Seal could not have produced.
func TermOf(ciphertext []byte) (uint32, error) {
	if len(ciphertext) < Overhead || ciphertext[0] != formatVersion {
		return 0, ErrMalformed
	}
	term := binary.BigEndian.Uint32(ciphertext[1:5])
	if term == 0 {
		return 0, ErrMalformed // terms start at 1
	}
	return term, nil
}

// newAEAD returns AES-256-GCM with the standard 96-bit nonce under key. The
// cipher keeps its own expanded copy, so the caller may clear key afterwards.
func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// keyAAD is the additional data of the data key with the given term.
func keyAAD(term uint32) []byte {
	return strconv.AppendUint([]byte("vault-key|"), uint64(term), 10)
}

// wrap seals plaintext under the root key as version || nonce || ct || tag.
// It is used for data keys and for the check value; the root key seals very
// few messages, so a random nonce is far from its limit.
func wrap(root cipher.AEAD, plaintext, aad []byte) []byte {
	out := make([]byte, 1+nonceSize, wrapOverhead+len(plaintext))
	out[0] = formatVersion
	rand.Read(out[1:]) // never fails since Go 1.24
	return root.Seal(out, out[1:1+nonceSize], plaintext, aad)
}

// unwrap opens what wrap sealed.
func unwrap(root cipher.AEAD, blob, aad []byte) ([]byte, error) {
	if len(blob) < wrapOverhead || blob[0] != formatVersion {
		return nil, ErrMalformed
	}
	pt, err := root.Open(nil, blob[1:1+nonceSize], blob[1+nonceSize:], aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}
