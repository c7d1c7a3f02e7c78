package cmd

import (
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X github.com/capturedev/capture/cmd.version=v1.2.3";
// otherwise the module version from `go install …@version` is used.
var version = ""

// versionString is the version this binary reports everywhere.
func versionString() string {
	if version != "" {
		return version
	}
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		v = info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 && (v == "" || v == "(devel)") {
				v = "devel-" + s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		Run: func(c *cobra.Command, _ []string) {
			fprintf(c.OutOrStdout(), "capture %s\n", versionString())
		},
	}
}
