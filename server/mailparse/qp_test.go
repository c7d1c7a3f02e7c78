package mailparse

import "testing"

// A quoted-printable line ending in '=' and white space is a soft line
// break (RFC 2045 §6.7 rule 3), whichever way the body is reached; other
// bad escapes still read as text.
func TestParseQuotedPrintableSpacedSoftBreak(t *testing.T) {
	const qp = "lower =c3=a9t=c3=a9 bad =ZZ end= \r\ntrailing space   \r\ntab=\t\r\nbed = literal\r\nlast= \t"
	const want = "lower été bad =ZZ endtrailing space\ntabbed = literal\nlast"
	tests := []struct{ name, raw, text string }{
		{"single part", "Subject: qp\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: quoted-printable\r\n\r\n" + qp, want},
		{"no content type", "Subject: qp\r\nContent-Transfer-Encoding: Quoted-Printable \r\n\r\n" + qp, want},
		{"lf line breaks", "Content-Transfer-Encoding: quoted-printable\n\nend= \nmore\n", "endmore\n"},
		{"multipart leaf", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + qp + "\r\n" +
			"--b\r\nContent-Type: text/plain\r\n\r\n8bit stays= \r\nas sent\r\n--b--\r\n",
			want + "\n8bit stays= \nas sent"},
		{"nested multipart leaf", "Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\n" +
			"Content-Type: multipart/alternative; boundary=i\r\n\r\n--i\r\n" +
			"Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nsoft= \r\nbreak\r\n--i--\r\n--o--\r\n",
			"softbreak"},
		{"not quoted-printable", "Content-Transfer-Encoding: 8bit\r\n\r\nkept= \r\nas sent\r\n", "kept= \nas sent\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, shortcut := range []bool{true, false} {
				m := parse([]byte(tt.raw), shortcut)
				eq(t, "Text", m.Text, ptr(tt.text))
			}
		})
	}
}
