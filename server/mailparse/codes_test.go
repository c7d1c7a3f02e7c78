package mailparse

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func codeValues(cs []Code) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Value)
	}
	return out
}

func TestFindCodes(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		text    string
		lines   string // visible HTML text, as scanHTML lays it out
		want    []string
	}{
		{name: "cue before", text: "Your verification code is 482913.", want: []string{"482913"}},
		{name: "cue after", subject: "482913 is your Acme code", want: []string{"482913"}},
		{name: "colon, no space", text: "Code:4821", want: []string{"4821"}},
		{name: "PIN that looks like a year", text: "Your PIN is 2019.", want: []string{"2019"}},
		{name: "verb", text: "Enter 482913 to verify your account.", want: []string{"482913"}},
		{name: "OTP five digits", text: "OTP: 48291", want: []string{"48291"}},
		{name: "grouped with no-break space", text: "Your code: 482\u00a0913", want: []string{"482913"}},
		{name: "two groups of four", text: "Security code 4829-1035", want: []string{"48291035"}},
		{name: "alphanumeric", text: "Your one-time code: XK7P2Q", want: []string{"XK7P2Q"}},
		{name: "lowercase needs a strong cue", text: "Your code: a7f3k9"},
		{name: "lowercase with a strong cue", text: "Your verification code: a7f3k9", want: []string{"a7f3k9"}},
		{name: "Russian", text: "Ваш код подтверждения: 4821", want: []string{"4821"}},
		{name: "Chinese without punctuation", text: "验证码482913，请勿泄露", want: []string{"482913"}},
		{name: "full-width digits", text: "認証コード：４８２９１３", want: []string{"482913"}},
		{name: "German compound", text: "Ihr Sicherheitscode: 730114", want: []string{"730114"}},
		{name: "isolated line below the cue", lines: "Use this code to sign in:\n\n482913\n\nIt expires soon.", want: []string{"482913"}},
		{name: "cell beside the cue", lines: "Your code 482913", want: []string{"482913"}},
		{name: "spaced digits alone", lines: "Your login code:\n\n4 8 2 9 1 3", want: []string{"482913"}},
		{name: "prefixed code alone", text: "Your sign-in code:\n\nACM-482913\n\nExpires in 10 minutes.", want: []string{"482913"}},
		{name: "one-letter prefix alone", lines: "Your sign-in code:\nG-482913", want: []string{"482913"}},
		{name: "a word before the hyphen is no prefix", text: "Your sign-in code:\n\nORDERS-482913", want: nil},
		{name: "subject and body merge", subject: "Your code: 482913", text: "Code: 482913", want: []string{"482913"}},
		{name: "order number between", text: "Your verification code for order 4821 is 9931.", want: []string{"9931"}},
		{name: "ranked", text: "Your new code is 664028. The old code 118734 no longer works.", want: []string{"664028", "118734"}},
		{name: "named in the next sentence", text: "Enter 302918 to continue. This is your authentication code.", want: []string{"302918"}},
		{name: "next sentence, passcode", text: "Use 482913 to sign in. It is a one-time passcode.", want: []string{"482913"}},
		// Equally named codes rank by shape: six digits is what a
		// one-time code most often looks like. Document order breaks ties.
		{name: "two labelled codes", text: "Ihr Bestätigungscode lautet: 5821\n認証コード：918273", want: []string{"918273", "5821"}},

		{name: "phone", text: "Your code is below. Call us at 1-800-555-0199 or (415) 555-0132."},
		{name: "order number", text: "Order #48213 has shipped. Order number: 48214."},
		{name: "price", text: "Code valid on orders over $4821. Total: 4 821,00 €"},
		{name: "promo", text: "Use promo code SAVE2024 for 20% off."},
		{name: "promo without the word promo", text: "Use code WELCOME10 at checkout."},
		{name: "postcode", text: "Postcode: SW1A 1AA. ZIP code 94103."},
		{name: "error code", text: "Error code 0x80070005"},
		{name: "code as a verb", text: "Learn to code in 2024."},
		{name: "time and date", text: "Your code expires at 10:30 on 14.05.2024 (2024-05-14)."},
		{name: "room", text: "Meeting code is in the invite. Room 4821."},
		{name: "card", text: "Card ending 4242. Auth code: 004821"},
		{name: "far away", text: "Here is your code.\n\nRegards,\nAcme\n\nAcme Inc., 1234 Market St, San Francisco, CA 94103"},
		{name: "inside a URL", text: "Your code: https://example.com/verify/482913"},
		{name: "inside an address", text: "Code sent to user482913@example.com"},
		{name: "too long", text: "Your code: 12345678901"},
		{name: "letters only", text: "Your code: ABCDEF"},
		{name: "minutes", text: "The code is valid for 1440 minutes."},
		{name: "unequal groups", text: "Your code: 555-0132"},
		{name: "next sentence, weak cue", text: "Enter 302918 to continue. This is your code."},
		{name: "next sentence, order number", text: "Your order 302918 has shipped. Your verification code is below."},
		{name: "next sentence, phone", text: "Call 4155550132 today. We will ask for your security code."},
		{name: "next sentence, date", text: "See you on 2024-05-14. Bring your verification code."},
		{name: "next sentence, labelling", text: "Ref 302918 is attached. Verification code: 5521", want: []string{"5521"}},
		{name: "two sentences on", text: "Enter 302918 to continue. Thanks. This is your authentication code."},
		{name: "next paragraph", text: "Enter 302918 to continue.\n\nThis is your authentication code."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text *string
			if tt.text != "" {
				text = &tt.text
			}
			got := findCodes(tt.subject, text, tt.lines)
			if !slices.Equal(codeValues(got), tt.want) {
				t.Errorf("codes = %+v, want %q", got, tt.want)
			}
			for _, c := range got {
				if n := utf8.RuneCountInString(c.Context); n == 0 || n > contextRunes {
					t.Errorf("context of %s has %d characters: %q", c.Value, n, c.Context)
				}
			}
		})
	}
}

func TestCodeContext(t *testing.T) {
	text := "Hello there, and welcome to the service that we built for you over many years. " +
		"Your verification code is 482913. It expires in ten minutes, so please hurry up and enter it in the app now."
	got := findCodes("", &text, "")
	if len(got) != 1 {
		t.Fatalf("codes = %+v", got)
	}
	ctx := got[0].Context
	if !strings.Contains(ctx, "Your verification code is 482913.") || utf8.RuneCountInString(ctx) > contextRunes {
		t.Errorf("context = %q", ctx)
	}
	if strings.HasPrefix(ctx, " ") || strings.HasSuffix(ctx, " ") {
		t.Errorf("context has edge spaces: %q", ctx)
	}
}

// TestFindCodesBounded feeds text crowded with cue words and numbers: the
// work per number is bounded, and so is the number of codes.
func TestFindCodesBounded(t *testing.T) {
	text := strings.Repeat("code 482913 code 118734 PIN 5521 verification ", 5000)
	got := findCodes(strings.Repeat("code 1234 ", 1000), &text, text)
	if len(got) > maxCodes {
		t.Errorf("%d codes", len(got))
	}
}

func TestListUnsubscribe(t *testing.T) {
	raw := crlf(`From: news@example.com
List-Unsubscribe: <mailto:leave@example.com?subject=x>, <https://example.com/u/1?t=9>,
 <https://example.com/u/2>
Content-Type: text/html

<a href="https://example.com/u/2">Manage</a> <a href="https://example.com/read">Read</a>
`)
	m := Parse(raw)
	eq(t, "Links", m.Links, []Link{
		{"https://example.com/u/2", ptr("Manage"), "https://example.com", KindUnsubscribe},
		{"https://example.com/read", ptr("Read"), "https://example.com", KindOther},
		{"https://example.com/u/1?t=9", nil, "https://example.com", KindUnsubscribe},
	})
}

// TestFindCodesMoreLanguages reads codes in Arabic, Hebrew, Persian, Hindi,
// Korean, Thai, Czech, Slovak, Hungarian, Turkish, Indonesian and
// Vietnamese mail, with the prefixes,
// particles and suffixes those languages attach to the word for code, and
// numbers in the same wording that are not codes.
func TestFindCodesMoreLanguages(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // the first code; "" for none
		context    string // what its context holds
	}{
		{"ar verification", "رمز التحقق الخاص بك هو 771204", "771204", "رمز التحقق الخاص بك هو 771204"},
		{"ar the code, and", "مرحباً أحمد،\nوالرمز الخاص بك: 482913\nلا تشاركه مع أحد.", "482913", "والرمز الخاص بك: 482913"},
		{"ar your code", "رمزك هو 305118. صالح لمدة 10 دقائق.", "305118", "رمزك هو 305118."},
		{"ar confirmation", "استخدم رمز التأكيد 7730 لإكمال التسجيل", "7730", "رمز التأكيد 7730"},
		{"ar kod with al", "الكود: 660214", "660214", "الكود: 660214"},
		{"ar one-time password", "كلمة المرور لمرة واحدة هي 918273", "918273", "المرور لمرة واحدة هي 918273"},
		{"ar Arabic-Indic digits", "رمز التحقق: ٤٨٢٩١٣", "482913", "رمز التحقق: ٤٨٢٩١٣"},
		{"ar order number", "رقم الطلب 771204", "", ""},
		{"ar order beside a code", "شكراً لطلبك. رقم الطلب 771204\nسيصلك رمز التحقق قريباً.", "", ""},
		{"ar price", "رمز العرض: المبلغ 4820 ريال", "", ""},
		{"ar phone", "لأي استفسار عن الرمز اتصل على هاتف 920012345", "", ""},
		{"ar postcode", "الرمز البريدي 11564", "", ""},
		{"ar date", "رمز التحقق صالح حتى 2024-05-14", "", ""},
		{"ar decimal", "الرمز: ١٢٫٥٠٠", "", ""},
		// Each of these is a code but for the Arabic separator or
		// percent sign beside it.
		{"ar decimal after", "الرمز: ١٢٣٤٫٥٠", "", ""},
		{"ar decimal before", "الرمز: ٠٫٤٨٢٩", "", ""},
		{"ar thousands after", "الرمز: ١٢٣٤٬٥٦٧", "", ""},
		{"ar thousands before", "الرمز: ١٢٬٥٦٧٨", "", ""},
		{"ar comma after", "الرمز: ٤٨٢٩،٥", "", ""},
		{"ar comma before", "الرمز: ٥،٤٨٢٩", "", ""},
		{"ar percent after", "الرمز: ١٢٣٤٪", "", ""},
		{"ar percent after a space", "الرمز: ١٢٣٤ ٪", "", ""},
		{"ar percent before", "الرمز: ٪١٢٣٤", "", ""},

		// "pos" and "posta" make a postcode only joined to the code noun:
		// alone they are a point of sale, or Italian for mail.
		{"id postcode", "Kode pos: 40115", "", ""},
		{"tr postcode", "Posta kodu: 34710", "", ""},
		{"tr postcode, capitals", "POSTA KODU 34710", "", ""},
		{"tr e-mail code", "E-posta kodu: 482913", "482913", "E-posta kodu: 482913"},
		{"it mailbox", "Ecco il codice per accedere alla tua casella di posta: 482913", "482913", "casella di posta: 482913"},
		{"en point of sale", "Your code for the POS terminal is 482913", "482913", "POS terminal is 482913"},

		{"he your code", "הקוד שלך הוא 482913", "482913", "הקוד שלך הוא 482913"},
		{"he verification", "קוד האימות: 482913", "482913", "קוד האימות: 482913"},
		{"he for the code", "להשלמת ההרשמה הזן את הקוד 550127 באפליקציה.", "550127", "הקוד 550127"},
		{"he one-time password", "סיסמה חד-פעמית: 739201", "739201", "סיסמה חד-פעמית: 739201"},
		{"he order number", "מספר הזמנה 482913", "", ""},
		{"he order beside a code", "קוד האימות יישלח בנפרד. מספר ההזמנה שלך: 482913", "", ""},
		{"he price", "קוד קופון: סכום 4820 ₪", "", ""},
		{"he phone", "שאלות על הקוד? טלפון 0501234567", "", ""},
		{"he postcode", "קוד מיקוד 6100001", "", ""},

		{"fa verification", "کد تأیید شما: 482913", "482913", "کد تأیید شما: 482913"},
		{"fa Persian digits", "کد تایید: ۴۸۲۹۱۳", "482913", "کد تایید: ۴۸۲۹۱۳"},
		{"fa tracking code", "کد رهگیری: 482913", "", ""},
		{"fa postal code", "کد پستی 1234567890", "", ""},

		{"hi code", "आपका कोड 482913 है", "482913", "आपका कोड 482913 है"},
		{"hi OTP", "आपका OTP 482913 है", "482913", "आपका OTP 482913 है"},
		{"hi verification", "आपका सत्यापन कोड 305118 है। इसे किसी के साथ साझा न करें।", "305118", "सत्यापन कोड 305118"},
		{"hi OTP in Devanagari", "ओटीपी: 7730", "7730", "ओटीपी: 7730"},
		{"hi order number", "आपका ऑर्डर नंबर 482913 है", "", ""},
		{"hi PIN code is a postcode", "डिलीवरी पिन कोड 110001", "", ""},
		{"hi price", "कोड लागू: कुल 4820 रुपये", "", ""},
		{"hi phone", "कोड के लिए फोन 9876543210 पर कॉल करें", "", ""},

		{"ko particle", "인증번호는 482913입니다", "482913", "인증번호는 482913입니다"},
		{"ko spaced", "인증 코드: 482913", "482913", "인증 코드: 482913"},
		{"ko security code", "보안 코드는 482913 입니다", "482913", "보안 코드는 482913 입니다"},
		{"ko object particle", "아래 코드를 입력하세요: 550127", "550127", "코드를 입력하세요: 550127"},
		{"ko card payment", "카드 결제 인증번호 482913", "482913", "카드 결제 인증번호 482913"},
		{"ko payment", "결제 인증번호는 482913입니다", "482913", "결제 인증번호는 482913입니다"},
		{"ko account", "계좌 인증번호 482913", "482913", "계좌 인증번호 482913"},
		{"ko order number", "주문번호 482913", "", ""},
		{"ko payment amount", "코드 결제금액 482913", "", ""},
		{"ko account number", "인증 코드: 계좌번호 48291305", "", ""},
		{"ko card payment code", "카드 결제 코드 482913", "", ""},
		{"ko postcode", "코드 우편번호 06236", "", ""},
		{"ko price", "할인 코드 적용 결제금액 48200원", "", ""},
		{"ko customer centre", "코드 문의: 고객센터 1588-1234", "", ""},

		{"th OTP", "รหัส OTP ของคุณคือ 482913", "482913", "รหัส OTP ของคุณคือ 482913"},
		{"th verification", "รหัสยืนยันของคุณคือ 482913", "482913", "รหัสยืนยันของคุณคือ 482913"},
		{"th code", "รหัสของคุณ: 550127 (ใช้ได้ภายใน 5 นาที)", "550127", "รหัสของคุณ: 550127"},
		{"th one-time password", "รหัสผ่านใช้ครั้งเดียว 739201", "739201", "รหัสผ่านใช้ครั้งเดียว 739201"},
		{"th postcode", "รหัสไปรษณีย์ 10110", "", ""},
		{"th tracking", "รหัสพัสดุ 482913", "", ""},
		{"th reference", "รหัสอ้างอิง 4829", "", ""},
		{"th price", "รหัสส่วนลด ราคา 4820 บาท", "", ""},
		{"th order", "รหัส หมายเลขคำสั่งซื้อ 482913", "", ""},

		{"cs verification", "Váš ověřovací kód je 482913", "482913", "Váš ověřovací kód je 482913"},
		{"cs code", "Kód pro přihlášení: 550127", "550127", "Kód pro přihlášení: 550127"},
		{"cs order", "Kód objednávky: 482913", "", ""},
		{"cs postcode", "Váš kód: PSČ 11000", "", ""},
		{"sk verification", "Váš overovací kód je 482913", "482913", "Váš overovací kód je 482913"},
		{"sk discount", "Zľavový kód: 482913", "", ""},
		{"hu verification", "Az ellenőrző kódod: 482913", "482913", "Az ellenőrző kódod: 482913"},
		{"hu your code", "A kódod: 550127", "550127", "A kódod: 550127"},
		{"hu order", "Rendelési kód: 482913", "", ""},
		{"hu postcode", "Kódod: irányítószám 1051", "", ""},
		{"tr verification", "Doğrulama kodu: 274930", "274930", "Doğrulama kodu: 274930"},
		{"tr order", "Kodunuz hazır. Sipariş 274930 kargoya verildi.", "", ""},
		{"id verification", "Kode verifikasi Anda adalah 482913", "482913", "Kode verifikasi Anda adalah 482913"},
		{"id one-time password", "Kata sandi sekali pakai: 739201", "739201", "sandi sekali pakai: 739201"},
		{"id postal code", "Kode pos 12190", "", ""},
		{"id order", "Kode Anda: nomor pesanan 482913", "", ""},
		{"id price", "Kode promo berlaku, total Rp 48200", "", ""},
		{"vi verification", "Mã xác minh của bạn là 482913", "482913", "Mã xác minh của bạn là 482913"},
		{"vi order code", "Mã đơn hàng 482913", "", ""},
		{"vi postal code", "Mã bưu chính 100000", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkFirstCode(t, tt.text, tt.want, tt.context) })
	}
}

// BenchmarkFindCodesArabic reads a long Arabic message, every word of
// which is looked up with and without its attached prefixes and suffixes.
func BenchmarkFindCodesArabic(b *testing.B) {
	text := strings.Repeat("مرحبا أحمد، شكرا لتسوقك معنا. تم شحن طلبك وسيصل خلال ثلاثة أيام عمل إلى عنوانك المسجل لدينا. ", 150) +
		"رمز التحقق الخاص بك هو 771204."
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if codes := findCodes("", &text, ""); len(codes) != 1 || codes[0].Value != "771204" {
			b.Fatalf("codes %v", codes)
		}
	}
}

// BenchmarkFindCodesRussian reads a long Russian message: every word is
// Cyrillic, and passes the checks for the unspaced scripts and for marks.
func BenchmarkFindCodesRussian(b *testing.B) {
	text := strings.Repeat("Здравствуйте, Иван! Спасибо за покупку в нашем магазине. Ваш заказ отправлен "+
		"и будет доставлен в течение трёх рабочих дней по адресу, указанному при оформлении. ", 150) +
		"Ваш код подтверждения: 771204."
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if codes := findCodes("", &text, ""); len(codes) != 1 || codes[0].Value != "771204" {
			b.Fatalf("codes %v", codes)
		}
	}
}

// TestFindCodesPasswords reads one-time and temporary passwords in the
// European languages: the qualifier before or after the noun, joined by a
// space, a hyphen or a short word, or compounded with it. A password
// shown without the qualifier is not a code, as in English.
func TestFindCodesPasswords(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // "" for none
	}{
		{"en one-time", "Your one-time password is 502917", "502917"},
		{"en temporary", "Your temporary password is 502943", "502943"},
		{"fr usage unique", "Votre mot de passe à usage unique : 502919", "502919"},
		{"fr temporaire", "Votre mot de passe temporaire : 502918", "502918"},
		{"fr provisoire, capitals", "MOT DE PASSE PROVISOIRE : 502945", "502945"},
		{"fr code à usage unique", "Code à usage unique : 5029", "5029"},
		{"de einmaliges", "Ihr einmaliges Passwort lautet 502920", "502920"},
		{"de temporäres", "Ihr temporäres Passwort: 502940", "502940"},
		{"de Einmal-Kennwort", "Ihr Einmal-Kennwort: 502946", "502946"},
		{"de Einmalkennwort", "Ihr Einmalkennwort lautet 502947", "502947"},
		{"de vorläufiges Kennwort", "Ihr vorläufiges Kennwort: 502948", "502948"},
		{"es de un solo uso", "Su contraseña de un solo uso es 502921", "502921"},
		{"es clave temporal", "Tu clave temporal: 502932", "502932"},
		{"es de uso único", "Tu contraseña de uso único: 502949", "502949"},
		{"es clave dinámica", "Tu clave dinámica es 502950", "502950"},
		{"pt de uso único", "Sua senha de uso único é 502922", "502922"},
		{"pt temporária", "Sua senha temporária: 502928", "502928"},
		{"pt palavra-passe temporária", "A sua palavra-passe temporária é 502951", "502951"},
		{"pt palavra-passe de uso único", "Palavra-passe de uso único: 502952", "502952"},
		{"it monouso", "La tua password monouso è 502923", "502923"},
		{"it temporanea", "La tua password temporanea: 502924", "502924"},
		{"nl eenmalig", "Uw eenmalig wachtwoord is 502925", "502925"},
		{"nl tijdelijke", "Je tijdelijke wachtwoord: 502926", "502926"},
		{"pl jednorazowe after", "Twoje hasło jednorazowe: 502927", "502927"},
		{"pl jednorazowe before", "Jednorazowe hasło: 502929", "502929"},
		{"pl tymczasowe", "Tymczasowe hasło: 502930", "502930"},
		{"sv engångslösenord", "Ditt engångslösenord är 502931", "502931"},
		{"sv tillfälligt", "Ditt tillfälliga lösenord: 502933", "502933"},
		{"da midlertidig", "Din midlertidige adgangskode er 502934", "502934"},
		{"no engangspassord", "Ditt engangspassord er 502935", "502935"},
		{"no midlertidig", "Ditt midlertidige passord: 502936", "502936"},
		{"fi kertakäyttöinen", "Kertakäyttöinen salasanasi on 502937", "502937"},
		{"fi väliaikainen", "Väliaikainen salasana: 502938", "502938"},
		{"cs jednorázové", "Vaše jednorázové heslo je 502939", "502939"},
		{"cs dočasné", "Dočasné heslo: 502941", "502941"},
		{"tr tek kullanımlık", "Tek kullanımlık şifreniz: 502942", "502942"},
		{"tr geçici", "Geçici şifreniz 502953", "502953"},

		// Shown passwords: not codes, as "Your password is 502944".
		{"en password", "Your password is 502944", ""},
		{"en password, colon", "Password: 502944", ""},
		{"fr mot de passe", "Votre mot de passe : 502944", ""},
		{"de Passwort", "Ihr Passwort lautet 502944", ""},
		{"de Kennwort", "Ihr Kennwort: 502944", ""},
		{"es contraseña", "Su contraseña es 502944", ""},
		{"es clave", "Tu clave: 502944", ""},
		{"pt senha", "Sua senha: 502944", ""},
		{"pt palavra-passe", "A sua palavra-passe é 502944", ""},
		{"it password", "La tua password è 502944", ""},
		{"nl wachtwoord", "Uw wachtwoord is 502944", ""},
		{"pl hasło", "Twoje hasło: 502944", ""},
		{"sv lösenord", "Ditt lösenord är 502944", ""},
		{"da adgangskode", "Din adgangskode er 502944", ""},
		{"no passord", "Ditt passord er 502944", ""},
		{"fi salasana", "Salasanasi on 502944", ""},
		{"cs heslo", "Vaše heslo je 502944", ""},
		{"tr şifre", "Şifreniz: 502944", ""},
		// The qualifiers alone say nothing.
		{"de einmalige Gebühr", "Einmalige Gebühr 502944", ""},
		{"fr usage unique alone", "Gobelets à usage unique : 502944", ""},
		{"es temporal alone", "Temporada temporal 502944", ""},
		// One-time in a sentence about something else.
		{"it monouso price", "Password monouso: prezzo 5029 EUR", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkFirstCode(t, tt.text, tt.want, tt.want) })
	}
}

// BenchmarkFindCodesEuropean reads a long French, Spanish and German
// message whose common words ("de", "un", "uso", "mot", "solo") begin the
// pairs of words that name a password, ahead of a verification code.
func BenchmarkFindCodesEuropean(b *testing.B) {
	text := strings.Repeat("Bonjour, un mot de votre conseiller : le mode d'emploi est à usage général. "+
		"Hola, solo un uso de la cuenta de correo es posible. Einmal im Monat senden wir Ihnen Neuigkeiten. ", 100) +
		"Votre code de vérification : 618402."
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if codes := findCodes("", &text, ""); len(codes) != 1 || codes[0].Value != "618402" {
			b.Fatalf("codes %v", codes)
		}
	}
}

// checkFirstCode checks that text, as a text body, gives want as its first
// code with a context holding context (or gives no code, want being ""),
// and gives the same first code as a subject.
func checkFirstCode(t *testing.T, text, want, context string) {
	t.Helper()
	got := findCodes("", &text, "")
	if want == "" {
		if len(got) != 0 {
			t.Errorf("codes = %+v, want none", got)
		}
		return
	}
	if len(got) == 0 || got[0].Value != want {
		t.Fatalf("codes = %+v, want %s first", got, want)
	}
	if !strings.Contains(got[0].Context, context) || utf8.RuneCountInString(got[0].Context) > contextRunes {
		t.Errorf("context = %q, want it to hold %q", got[0].Context, context)
	}
	if got := findCodes(text, nil, ""); len(got) == 0 || got[0].Value != want {
		t.Errorf("in the subject: codes = %+v", got)
	}
}

// TestUnspacedCodeScript checks the ranges unspacedCodeScript reads
// against Unicode's Han, Hiragana, Katakana, Hangul and Thai scripts, for
// every assigned character.
func TestUnspacedCodeScript(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
			continue
		}
		want := r == 'ー' || unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai)
		if got := unspacedCodeScript(r); got != want {
			t.Errorf("unspacedCodeScript(%U) = %v", r, got)
		}
	}
}

// TestCommonLetter checks that the letters wordEnd takes without a look in
// Unicode's tables are letters.
func TestCommonLetter(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if commonLetter(r) && !unicode.IsLetter(r) {
			t.Errorf("commonLetter(%U) is not a letter", r)
		}
	}
}
