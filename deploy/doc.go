// Package deploy holds the tests of the deployment files at the repository's
// root: docker-compose.yml is loaded with the Compose specification's own
// loader (compose-go), and the Dockerfile is parsed and compared with the
// Makefile's build target. No Docker engine is needed. The container's
// health probe lives in deploy/healthcheck.
package deploy
