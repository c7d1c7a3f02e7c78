package forward

import _ "embed"

// PythonClientName is the file name the Python client is served under.
const PythonClientName = "capture-forward.py"

// PythonClient is the single-file Python forwarding client, served at
// /downloads/capture-forward.py so a machine without Go can fetch it.
//
//go:embed capture_forward.py
var PythonClient []byte
