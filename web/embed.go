package web

import "embed"

// files holds the page templates and the static assets.
//
//go:embed templates/*.html static/*
var files embed.FS
