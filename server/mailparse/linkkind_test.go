package mailparse

import "testing"

func TestLinkKinds(t *testing.T) {
	tests := []struct {
		url, text, label, lead string
		want                   string
	}{
		{url: "https://a.example/verify?token=abc123", want: KindVerify},
		{url: "https://a.example/users/confirmation?confirmation_token=Zx8Kq2LmP4vR", want: KindVerify},
		{url: "https://a.example/activate/5c2d8e3f-1a4b-4c6d-9e8f-0a1b2c3d4e5f", want: KindVerify},
		{url: "https://a.example/c/Xk2pQ9LmZ7", text: "Confirm your email", want: KindVerify},
		{url: "https://a.example/c/Xk2pQ9LmZ7", label: "Verify email", want: KindVerify},
		{url: "https://a.example/password/reset?token=abc123", want: KindReset},
		{url: "https://a.example/c/Xk2pQ9LmZ7", text: "Restablecer contraseña", want: KindReset},
		{url: "https://a.example/c/Xk2pQ9LmZ7", text: "click here", lead: "To reset your password,", want: KindReset},
		{url: "https://a.example/auth/magic?token=eyJhbGciOiJIUzI1NiJ9", text: "Log in", want: KindLogin},
		{url: "https://a.example/login?token=abc123def", want: KindLogin},
		{url: "https://a.example/unsubscribe", want: KindUnsubscribe},
		{url: "https://a.example/u/1", text: "Opt out", want: KindUnsubscribe},
		{url: "https://a.example/prefs", text: "Manage your preferences", want: KindUnsubscribe},
		{url: "https://a.example/x", text: "here", lead: "To stop receiving these emails, click", want: KindUnsubscribe},
		{url: "https://a.example/x", text: "配信停止", want: KindUnsubscribe},

		// Readable fixture tokens: a value under a credential's name is a
		// credential, however it looks.
		{url: "https://app.example.com/reset-password?token=secret-reset-token", text: "Reset your password", want: KindReset},
		{url: "https://app.example.com/login/magic?token=magic-token", text: "Sign in to Example", want: KindLogin},
		{url: "https://app.example.com/verify-email?token=verifytoken", text: "Verify your email address", want: KindVerify},
		{url: "https://app.example.com/verify?token=TOKEN123", text: "Verify your email address", want: KindVerify},
		{url: "https://app.example.com/account/activate?code=ABCD", text: "Activate account", want: KindVerify},
		{url: "https://x.test/verify?token=12345", want: KindVerify},
		{url: "https://x.test/magic?token=tok_1", want: KindLogin},
		{url: "https://app.acme.test/reset-password?token=abc", want: KindReset},
		{url: "https://a.example/invite/confirm?invite_code=WELCOME", want: KindVerify},
		// Framework defaults (django-allauth, Firebase, Supabase) under an
		// anchor that says nothing.
		{url: "http://localhost:8000/accounts/confirm-email/MQ:1tTx2w:abc/", text: "http://localhost:8000/accounts/confirm-email/MQ:1tTx2w:abc/", want: KindVerify},
		{url: "http://localhost:8000/accounts/password/reset/key/1-abc/", text: "http://localhost:8000/accounts/password/reset/key/1-abc/", want: KindReset},
		{url: "https://p.firebaseapp.com/__/auth/action?mode=verifyEmail&oobCode=x&apiKey=k", text: "Continue", want: KindVerify},
		{url: "https://p.firebaseapp.com/__/auth/action?mode=resetPassword&oobCode=x&apiKey=k", text: "Continue", want: KindReset},
		{url: "https://p.firebaseapp.com/__/auth/action?mode=signIn&oobCode=x&apiKey=k", text: "Continue", want: KindLogin},
		{url: "https://x.supabase.co/auth/v1/verify?token=y&type=magiclink&redirect_to=http://localhost:3000", text: "Continue", want: KindLogin},
		{url: "https://x.supabase.co/auth/v1/verify?token=y&type=signup&redirect_to=http://localhost:3000", text: "Confirm your mail", want: KindVerify},
		{url: "https://x.supabase.co/auth/v1/verify?token=y&type=recovery&redirect_to=http://localhost:3000", text: "Reset Password", want: KindReset},
		// No credential: the anchor and the URL path name the same action.
		{url: "https://app.example.com/confirm-email/abcdef", text: "Confirm email", want: KindVerify},
		{url: "https://app.example.com/password-reset", text: "Reset your password", want: KindReset},
		{url: "https://app.example.com/auth/magic-link", text: "Log in with magic link", want: KindLogin},
		{url: "https://app.example.com/account/activate", text: "Activate account", want: KindVerify},
		{url: "https://app.example.com/reset-password/confirm", text: "Choose a new password", want: KindReset},
		{url: "https://community.example.com/u/activate-account/3f9a1c7e2b", text: "Activate your account", want: KindVerify},
		{url: "https://support.example.com/verification/email?token=abc", text: "Verify your email", want: KindVerify},

		// No credential and the anchor alone, or the URL alone, says it: a
		// page about the action, not the action.
		{url: "https://a.example/login", text: "Log in", want: KindOther},
		{url: "https://a.example/login?redirect=%2Fdashboard&utm_source=email", text: "Log in", want: KindOther},
		{url: "https://a.example/signin", text: "Sign in to your account", want: KindOther},
		{url: "https://a.example/verify-your-email-2024.html", text: "Verify email", want: KindOther},
		{url: "https://a.example/account", text: "Verify your email", want: KindOther},
		{url: "https://a.example/password-reset", text: "https://a.example/password-reset", lead: "To get a new reset link, visit", want: KindOther},
		{url: "https://a.example/verify-email", want: KindOther},
		{url: "https://a.example/password-reset", text: "Sign in", want: KindOther},
		// Help, docs, blogs and articles, whatever their words.
		{url: "https://help.example/articles/how-to-reset-your-password", text: "Reset your password", want: KindOther},
		{url: "https://example.com/help/how-to-reset-your-password", text: "Reset your password", want: KindOther},
		{url: "https://example.com/help/reset-password", text: "Reset your password", want: KindOther},
		{url: "https://support.example.com/hc/en-us/articles/115004151507", text: "Reset your password", want: KindOther},
		{url: "https://docs.example.com/auth/magic-links", text: "Magic links", want: KindOther},
		{url: "https://help.example.com/reset-password", text: "Reset your password", want: KindOther},
		{url: "https://example.com/blog/introducing-magic-link-sign-in", text: "Sign in with a magic link", want: KindOther},
		{url: "https://example.com/faq#reset-password", text: "Reset password", want: KindOther},
		{url: "https://example.com/docs/verify-email?token=abc123", text: "Verify email", want: KindOther},
		{url: "https://example.com/account/verify", text: "Learn how to verify your account", want: KindOther},
		{url: "https://example.com/security", text: "Learn more about verifying your account", want: KindOther},
		{url: "https://example.com/support", text: "Forgot your password? Contact support", want: KindOther},
		{url: "https://example.com/contact?topic=password-reset", text: "Forgot your password? Contact us", want: KindOther},
		{url: "https://example.com/reset-password", text: "How to reset your password", want: KindOther},
		// Marketing.
		{url: "https://shop.example.com/spring-sale?utm_campaign=reset", text: "Reset your style: 30% off", want: KindOther},
		{url: "https://example.com/pricing?utm_source=email", text: "Activate Pro today", want: KindOther},
		{url: "https://example.com/trial/activate?utm_source=newsletter", text: "Activate your free trial", want: KindOther},
		{url: "https://example.com/offers/activate?code=SPRING20", text: "Activate your offer", want: KindOther},
		{url: "https://example.com/certifications?utm_medium=email", text: "Verify your skills", want: KindOther},
		// An order's confirmation is not an address to confirm.
		{url: "https://a.example/orders/48213/confirmation?key=abc123", want: KindOther},
		{url: "https://a.example/orders/confirm", text: "Confirm order", want: KindOther},
		{url: "https://a.example/c/Xk2pQ9LmZ7", text: "View order", lead: "Please confirm", want: KindOther},
		// Campaign parameters do not speak for the link.
		{url: "https://a.example/help?utm_campaign=password_reset&id=a1b2c3d4", text: "Help", want: KindOther},
		{url: "https://a.example/verify/cancel?id=AbC123xYz987", want: KindOther},
		{url: "https://a.example/c/Xk2pQ9LmZ7", text: "Confirm unsubscribe", want: KindUnsubscribe},
		{url: "https://example.com/track?postcode=SW1A1AA", text: "Confirm delivery address", want: KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.url+" "+tt.text, func(t *testing.T) {
			var ls linkSet
			cue := linkCue{label: tt.label, lead: tt.lead}
			if tt.text != "" {
				cue.text = &tt.text
			}
			ls.add(tt.url, cue, "")
			if len(ls.links) != 1 || ls.links[0].Kind != tt.want {
				t.Errorf("links = %+v, want kind %s", ls.links, tt.want)
			}
		})
	}
}

// TestLinkKindsInMessage judges links as a message carries them: HTML
// anchors, and URLs in a text body with the words before them.
func TestLinkKindsInMessage(t *testing.T) {
	raw := crlf(`From: app@example.com
To: alice@example.com
Subject: Your account
Content-Type: multipart/alternative; boundary=b

--b
Content-Type: text/plain; charset=utf-8

Confirm your address: https://x.test/verify?token=12345
Or sign in at once: https://x.test/magic?token=tok_1
Forgot your password? Read https://x.test/help/reset-password
--b
Content-Type: text/html; charset=utf-8

<p><a href="https://app.example.com/password-reset">Reset your password</a></p>
<p><a href="https://app.example.com/auth/magic-link">Log in with magic link</a></p>
<p><a href="https://app.example.com/login">Log in</a> ·
<a href="https://example.com/blog/how-we-verify-accounts">Learn how we verify accounts</a></p>
--b--
`)
	m := Parse(raw)
	kinds := map[string]string{}
	for _, l := range m.Links {
		kinds[l.URL] = l.Kind
	}
	for u, want := range map[string]string{
		"https://x.test/verify?token=12345":               KindVerify,
		"https://x.test/magic?token=tok_1":                KindLogin,
		"https://x.test/help/reset-password":              KindOther,
		"https://app.example.com/password-reset":          KindReset,
		"https://app.example.com/auth/magic-link":         KindLogin,
		"https://app.example.com/login":                   KindOther,
		"https://example.com/blog/how-we-verify-accounts": KindOther,
	} {
		if got, ok := kinds[u]; !ok || got != want {
			t.Errorf("%s: kind %q (found %v), want %s", u, got, ok, want)
		}
	}
	if len(m.Links) != 7 {
		t.Errorf("%d links: %+v", len(m.Links), m.Links)
	}
}

// Keycloak's plain-text mails put every action under /login-actions/: the
// sentence before a URL written out says what it does.
func TestLinkKindsKeycloakText(t *testing.T) {
	for lead, want := range map[string]string{
		"Someone has created a Acme account with this email address. If this was you, click the link below to verify your email address": KindVerify,
		"Someone just requested to change your Acme account's credentials. If this was you, click on the link below to reset them.":      KindReset,
	} {
		raw := crlf("From: keycloak@acme.test\nTo: alice@example.com\nSubject: Acme\nContent-Type: text/plain; charset=utf-8\n\n" +
			lead + "\n\nhttp://localhost:8080/realms/acme/login-actions/action-token?key=eyJhbGciOiJIUzUxMiJ9.eyJleHAiOjE3MzI0NTAwMDB9.sg2&client_id=account-console&tab_id=T3xt01\n\n" +
			"This link will expire within 5 minutes.\n")
		m := Parse(raw)
		if len(m.Links) != 1 || m.Links[0].Kind != want {
			t.Errorf("%q: links %+v, want one of kind %s", lead[len(lead)-40:], m.Links, want)
		}
	}
}
