package cmd

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/store"
)

func newCACmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ca",
		Short: "Print the local CA certificate (PEM) that signs the SMTP certificate",
		Long: `ca prints the PEM of the local CA that capture serve generated in the data dir
(or in the --database that replicas share).
Trust it in the application under test so that SMTP TLS validates, e.g.

  capture ca > capture-ca.pem
  NODE_EXTRA_CA_CERTS=capture-ca.pem node app.js

SSL_CERT_FILE replaces the trust store rather than adding to it, so give
Python (and other OpenSSL-based tools) the system's CAs and capture's:

  cat /etc/ssl/certs/ca-certificates.crt capture-ca.pem > ca-bundle.pem
  SSL_CERT_FILE=$PWD/ca-bundle.pem python app.py`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			url, err := database(c)
			if err != nil {
				return err
			}
			var pem []byte
			if url != "" {
				// Replicas of a shared database keep the CA in it.
				err = withStore(c, func(st *store.Store) error {
					pem, err = certs.CAPEMIn(certs.InDatabase(c.Context(), st, store.ErrNotFound), "the database")
					return err
				})
			} else {
				var dir string
				if dir, err = dataDir(c); err == nil {
					pem, err = certs.CAPEM(filepath.Join(dir, "tls"))
				}
			}
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(pem)
			return err
		},
	}
}
