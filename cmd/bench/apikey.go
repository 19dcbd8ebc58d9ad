package main

import (
	"os"

	"github.com/spf13/cobra"
)

// apiKeyEnv is read when --api-key is not given, as the OpenAI SDKs do.
const apiKeyEnv = "OPENAI_API_KEY"

const apiKeyHelp = `bearer key sent as "Authorization: Bearer KEY" on every request (readiness probes, ` +
	`requests, profile endpoints) and passed to launched servers as --api-key (roseinfer, vLLM, SGLang, ` +
	`llama-server; {api_key} in --backend-cmd; trtllm-serve has no such option and runs open); ` +
	`default $` + apiKeyEnv + `; never written to results or logs (*** in recorded commands)`

// registerAPIKey adds --api-key. Its default is empty in the help, so the
// environment's key is never printed; apiKey resolves it after parsing.
func registerAPIKey(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "api-key", "", apiKeyHelp)
}

// apiKey is --api-key when given (even empty), else $OPENAI_API_KEY.
func apiKey(cmd *cobra.Command, flagValue string) string {
	if cmd.Flags().Changed("api-key") {
		return flagValue
	}
	return os.Getenv(apiKeyEnv)
}
