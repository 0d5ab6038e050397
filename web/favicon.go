package web

import "net/http"

// serveFavicon answers /favicon.ico, which browsers ask for on their own
// (pages also name the hashed SVG with <link rel=icon>), with the same SVG
// icon, so that no page logs a 404.
func (h *handler) serveFavicon(w http.ResponseWriter, r *http.Request) {
	h.writeAsset(w, r, assetName(h.urls["favicon.svg"]), "public, max-age=86400")
}

// assetName is the hashed file name of a /static/ URL.
func assetName(u string) string {
	const prefix = "/static/"
	if len(u) <= len(prefix) {
		return ""
	}
	return u[len(prefix):]
}
