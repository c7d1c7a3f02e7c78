// What every provider script shares: the message to send, given by the Go
// test in CAPTURE_SEND as JSON, and how to report back on stdout.
//
// CAPTURE_SEND: {base_url, host, inbox, password, from_name, from, to[],
// cc[], bcc[], subject, text, html, attachment: {filename, content_type,
// base64}}
export const send = JSON.parse(process.env.CAPTURE_SEND);
export const attachmentBytes = Buffer.from(send.attachment.base64, 'base64');
export const fromHeader = `${send.from_name} <${send.from}>`;

// content is the message's recipients, subject and bodies under the
// lowercase names SendGrid, Mailgun and Resend share.
export const content = {
  to: send.to,
  cc: send.cc,
  bcc: send.bcc,
  subject: send.subject,
  text: send.text,
  html: send.html,
};

// report prints the one line of JSON the Go test reads.
export function report(result) {
  process.stdout.write(JSON.stringify(result) + '\n');
}

// fail reports an unexpected error and exits non-zero.
export function fail(err) {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
}
