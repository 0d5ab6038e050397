// Package deploy holds the tests of the deployment files: docker-compose.yml
// is loaded with the Compose specification's own loader (compose-go), the
// Dockerfile is parsed and compared with the Makefile's build target, and the
// Helm chart in deploy/helm/mcpgate is rendered with a pinned Helm and every
// object decoded strictly into its k8s.io/api type. No Docker engine and no
// cluster are needed. The container's health probe lives in deploy/healthcheck.
//
// Imports from this module: none.
package deploy
