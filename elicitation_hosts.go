package mcpgate

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// An upstream server's URL-mode elicitation sends the person to a web
// page of the server's choosing (a sign-in, a payment). The gateway
// relays it only to a host an admin allow-listed for that server
// (Server.ElicitationURLHosts); the hosts a server asked for are kept
// (Server.ElicitationHostsSeen), so that an admin sees what a server
// wants and can allow it in one step.

// Bounds on the hosts of one server.
const (
	// MaxElicitationURLHosts bounds a server's allow-list: a handful of
	// sign-in or payment hosts, not a web directory.
	MaxElicitationURLHosts = 50
	// MaxElicitationHostsSeen bounds the hosts kept as seen per server:
	// the least recently seen go first, so that a server that names a new
	// host for each request cannot grow the table.
	MaxElicitationHostsSeen = 100
	maxHostEntry            = 261 // a 253-byte name, ":" and a port
)

// ElicitationHost is one host a server's URL-mode elicitation named: when
// it was first and last seen, and how many times.
type ElicitationHost struct {
	Host      string    `json:"host"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Times     int64     `json:"times"`
}

// NormalizeElicitationHosts checks an allow-list as an admin gave it and
// returns it in its stored form: entries trimmed and lower-cased, empty
// ones and repeats dropped, in the order given. An entry is a DNS name or
// an IP literal (IPv6 in brackets), with an optional port, and an
// optional leading "*." that matches the name's subdomains (not the name
// itself; at least two labels after it, and never an IP); no scheme, no
// path. The first bad entry is named in the error.
func NormalizeElicitationHosts(hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	seen := map[string]bool{}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || seen[h] {
			continue
		}
		if err := ValidateElicitationHost(h); err != nil {
			return nil, err
		}
		seen[h] = true
		out = append(out, h)
	}
	if len(out) > MaxElicitationURLHosts {
		return nil, Errorf(EInvalid, "elicitation_url_hosts holds %d hosts, at most %d", len(out), MaxElicitationURLHosts)
	}
	return out, nil
}

// ValidateElicitationHost checks one allow-list entry in its stored
// (lower-case) form; see NormalizeElicitationHosts.
func ValidateElicitationHost(entry string) error {
	if _, _, _, ok := parseHostEntry(entry); !ok {
		return Errorf(EInvalid, "elicitation_url_hosts: %q is not a host: give a lower-case name or IP address, "+
			"optionally with :port or a leading *. for its subdomains, without https:// or a path", cutEntry(entry))
	}
	return nil
}

func cutEntry(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// parseHostEntry splits an entry into its host (a name, or an IP without
// brackets), its port ("" for none) and whether it is a wildcard.
func parseHostEntry(entry string) (host, port string, wildcard, ok bool) {
	if entry == "" || len(entry) > maxHostEntry || entry != strings.ToLower(entry) {
		return "", "", false, false
	}
	rest, wildcard := strings.CutPrefix(entry, "*.")
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 || wildcard {
			return "", "", false, false
		}
		host, tail := rest[1:end], rest[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" || (tail != "" && !validPortSuffix(tail)) {
			return "", "", false, false
		}
		return a.String(), strings.TrimPrefix(tail, ":"), false, a.String() == host
	}
	host = rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		if !validPortSuffix(rest[i:]) {
			return "", "", false, false
		}
		host, port = rest[:i], rest[i+1:]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// An IPv6 literal is given in brackets, and no IP has subdomains.
		return host, port, false, a.Is4() && !wildcard && a.String() == host
	}
	if !validDNSName(host) || (wildcard && !strings.Contains(host, ".")) {
		return "", "", false, false
	}
	return host, port, wildcard, true
}

// validPortSuffix reports whether s is ":" and a port from 1 to 65535,
// written without leading zeros.
func validPortSuffix(s string) bool {
	p, ok := strings.CutPrefix(s, ":")
	if !ok || p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

// validDNSName reports whether s is a lower-case ASCII DNS name (an IDN in
// its xn-- form): labels of letters, digits and inner hyphens, 1 to 63
// bytes each, 253 in all, the last not all digits (that would be an IP
// address written wrong).
func validDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}

// ElicitationHostAllowed reports whether a URL-mode elicitation's URL may
// be relayed to the person under allowList, and returns the URL's host in
// the form an entry takes (lower case, the port only when it is not the
// scheme's default, IPv6 in brackets), for the hosts seen and the
// dashboard's "Allow"; host is "" when the URL has none an entry could
// name (it does not parse, its host is not a DNS name or IP literal).
//
// The URL must be https: a page reached over plain http can be changed on
// the way, and the person is asked to trust it. The one exception is a
// loopback host (localhost, 127.0.0.0/8, ::1) named in the list: its
// traffic never leaves the person's machine. A URL with user information
// ("https://trusted.example@evil.example/") is refused: it reads as a host
// it does not go to. Comparison ignores case; an entry without a port
// matches the scheme's default port only (and one with that port is the
// same as one without); "*.example.com" matches
// a.example.com and a.b.example.com, never example.com.
func ElicitationHostAllowed(allowList []string, rawURL string) (host string, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	defaultPort := map[string]string{"https": "443", "http": "80"}[scheme]
	if defaultPort == "" {
		return "", false
	}
	name := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == defaultPort {
		port = ""
	}
	host = name
	if strings.Contains(name, ":") {
		host = "[" + name + "]"
	}
	if port != "" {
		host += ":" + port
	}
	name, port, _, valid := parseHostEntry(host)
	if !valid {
		return "", false
	}
	if u.User != nil || (scheme == "http" && !isLoopbackName(name)) {
		return host, false
	}
	for _, e := range allowList {
		eName, ePort, wildcard, ok := parseHostEntry(strings.ToLower(strings.TrimSpace(e)))
		if ePort == defaultPort {
			ePort = "" // "example.com:443" is example.com
		}
		if !ok || ePort != port {
			continue
		}
		if wildcard && strings.HasSuffix(name, "."+eName) || !wildcard && name == eName {
			return host, true
		}
	}
	return host, false
}

// isLoopbackName reports whether a host (a name, or an IP without
// brackets) is this machine.
func isLoopbackName(name string) bool {
	if name == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(name)
	return err == nil && a.IsLoopback()
}
