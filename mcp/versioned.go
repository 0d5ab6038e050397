package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Answers per negotiated protocol version. go-sdk v1.8 writes the caching
// fields of the 2026-07-28 protocol (ttlMs, cacheScope) into every list
// result, whatever version the session speaks, and answers a read of an
// unknown resource with -32602, the code of 2026-07-28 (SEP-2164), where
// 2025-11-25 and earlier list -32002. A client of an older version must see
// only what its version defines, so for those sessions the answers of the
// methods concerned are rewritten here, on both paths (fast and SDK).

// newerListFields are the result fields an older session must not see.
var newerListFields = []string{"ttlMs", "cacheScope"}

// versionedMethods are the methods whose answers differ by version.
var versionedMethods = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true}

// Resource-not-found codes: the 2026-07-28 protocol's, which go-sdk sends,
// and the one of the versions before it.
const (
	codeInvalidParams          = -32602
	codeLegacyResourceNotFound = -32002
)

// legacyAnswer reports whether a request's answer must be rewritten for an
// older protocol version: its version is one before newProtocol (no header
// is 2025-03-26) and its method is one whose answer differs.
func legacyAnswer(r *http.Request, body []byte) bool {
	if r.Method != http.MethodPost || !legacyVersions[r.Header.Get("Mcp-Protocol-Version")] ||
		(!bytes.Contains(body, []byte("list")) && !bytes.Contains(body, []byte("read"))) {
		return false // most requests (tools/call) are not decoded twice
	}
	var env struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &env) == nil && versionedMethods[env.Method]
}

// legacyWriter holds an answer back until the handler is done and then
// writes it rewritten for an older protocol version. The answers it is used
// for are a single small message, so holding them costs no streaming.
type legacyWriter struct {
	w      http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (l *legacyWriter) Header() http.Header { return l.w.Header() }

func (l *legacyWriter) WriteHeader(status int) {
	if l.status == 0 {
		l.status = status
	}
}

func (l *legacyWriter) Write(b []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	return l.buf.Write(b)
}

// Flush is a no-op: the answer goes out whole, in finish.
func (l *legacyWriter) Flush() {}

// finish writes the held answer, each JSON-RPC message rewritten.
func (l *legacyWriter) finish() {
	if l.status == 0 {
		return
	}
	out := l.buf.Bytes()
	if bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
		out = legacyMessage(out)
	} else {
		lines := bytes.Split(out, []byte("\n"))
		for i, line := range lines {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				lines[i] = append([]byte("data: "), legacyMessage(data)...)
			}
		}
		out = bytes.Join(lines, []byte("\n"))
	}
	l.w.Header().Del("Content-Length")
	l.w.WriteHeader(l.status)
	_, _ = l.w.Write(out)
}

// legacyMessage rewrites one JSON-RPC answer for an older version: the
// newer result fields dropped, the resource-not-found code of its time. A
// message it cannot read is left as it is.
func legacyMessage(msg []byte) []byte {
	var env map[string]json.RawMessage
	if json.Unmarshal(msg, &env) != nil {
		return msg
	}
	changed := false
	if res, ok := env["result"]; ok {
		var fields map[string]json.RawMessage
		if json.Unmarshal(res, &fields) == nil {
			for _, f := range newerListFields {
				if _, ok := fields[f]; ok {
					delete(fields, f)
					changed = true
				}
			}
			if changed {
				env["result"], _ = json.Marshal(fields)
			}
		}
	}
	if e, ok := env["error"]; ok {
		var rpcErr map[string]json.RawMessage
		var code int
		if json.Unmarshal(e, &rpcErr) == nil && json.Unmarshal(rpcErr["code"], &code) == nil && code == codeInvalidParams &&
			string(rpcErr["message"]) == `"Resource not found"` {
			rpcErr["code"] = json.RawMessage(strconv.Itoa(codeLegacyResourceNotFound))
			env["error"], _ = json.Marshal(rpcErr)
			changed = true
		}
	}
	if !changed {
		return msg
	}
	b, err := json.Marshal(env)
	if err != nil {
		return msg
	}
	return b
}
