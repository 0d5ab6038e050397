package service

import (
	"cmp"
	"context"
	"time"
)

// The mail throttle: every route that makes the gateway send an
// email goes through throttleMail, which counts the send per target address
// and per person (and, on routes without a session, per client address),
// each per kind of mail. So nobody can flood an inbox, from one account or
// many, or the mail server, from one address. Every request counts, whether
// or not a mail follows (a reset for an unknown address counts like one for
// a known one), so a refusal says nothing about which addresses have
// accounts; and the per-person count is kept only on signed-in routes,
// where the person is known anyway.
const (
	mailPerTarget = 3  // mails of one kind to one address per window
	mailPerPerson = 3  // mails of one kind one signed-in person asks for per window
	mailPerClient = 20 // mails of one kind asked for from one client address per window
	mailWindow    = 15 * time.Minute
)

// mailSend is one request to send a mail, as the throttle counts it.
type mailSend struct {
	kind   string // what for: "reset", "verify", "email_change", "signup"
	to     string // the address the mail goes to (normalized)
	userID string // the signed-in person who asks, or ""
	client string // the client address of a route without a session, or ""
	// workspace, when set, counts the mail against the workspace too
	// (approval mails), perWorkspace a window; perTarget, when set,
	// replaces mailPerTarget for this kind.
	workspace    string
	perWorkspace int
	perTarget    int
	// refusal is the message of the 429.
	refusal string
}

// throttleMail counts m against every limit it falls under, all counts in
// one statement (store.CountAttempts), so that parallel requests are counted
// one after the other in every limit alike; past any limit it refuses with
// Retry-After.
func (s *Service) throttleMail(ctx context.Context, m mailSend) error {
	type counter struct {
		subject string
		limit   int
	}
	counters := []counter{{"mail:" + m.kind + ":to:" + m.to, cmp.Or(m.perTarget, mailPerTarget)}}
	if m.workspace != "" {
		counters = append(counters, counter{"mail:" + m.kind + ":workspace:" + m.workspace, m.perWorkspace})
	}
	if m.userID != "" {
		counters = append(counters, counter{"mail:" + m.kind + ":user:" + m.userID, mailPerPerson})
	}
	if m.client != "" {
		counters = append(counters, counter{"mail:" + m.kind + ":client:" + addressSubject(m.client), mailPerClient})
	}
	subjects := make([]string, len(counters))
	for i, c := range counters {
		subjects[i] = c.subject
	}
	counts, starts, err := s.db.CountAttempts(ctx, mailWindow, subjects...)
	if err != nil {
		return err
	}
	for i, c := range counters {
		if counts[i] > c.limit {
			return windowRefusal(starts[i], mailWindow, m.refusal)
		}
	}
	return nil
}
