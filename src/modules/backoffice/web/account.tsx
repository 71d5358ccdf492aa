import type { Context } from 'koa';
import QRCode from 'qrcode';
import type { AppContext } from '../../../context.ts';
import { issueLoginTicket, TicketRefusedError } from '../../mobile/tickets.ts';
import type { FieldErrors } from '../../../validation/form.ts';
import { changePassword } from '../../staff/service.ts';
import { adminState, forbidden, modelUrl } from './common.tsx';
import { ErrorList, renderObjectPage, submitObjectForm } from './changeform.tsx';
import { formatDateTime, type DatePreferences } from './format.ts';
import { CsrfField } from './layout.tsx';
import { addMessage } from './session.ts';
import { LoginThrottledError, throttledPasswordChange } from './throttle.ts';

/**
 * The signed-in user's own page, /admin/auth/user/<own id>/change/: any staff user may open it,
 * auth permissions or not (read-only without them). Below the record: the password change form
 * (the other web sessions end, this one stays; its old password counts in the login throttle) and
 * the mobile pairing QR code, issued on request and shown only here, once, as a data: PNG.
 */

const USER_APP = 'auth';
const USER_MODEL = 'user';

/** Whether the URL names the signed-in user's own record (the password and pairing routes name auth/user in their path). */
export function isOwnPage(ctx: Context): boolean {
  const names = ctx.params.app === undefined || (ctx.params.app === USER_APP && ctx.params.model === USER_MODEL);
  return names && ctx.params.pk === adminState(ctx).principal.user.id;
}

interface Pairing {
  image: string;
  expiresAt: Date;
}

function ownUrl(userId: string, suffix: string): string {
  return modelUrl({ appLabel: USER_APP, model: USER_MODEL }, `${encodeURIComponent(userId)}/${suffix}`);
}

function AccountSections({ userId, csrfToken, preferences, passwordError, passwordErrors, pairing, pairingError }: {
  userId: string;
  csrfToken: string;
  preferences: DatePreferences;
  /** The form as a whole refused (the login throttle tripped). */
  passwordError?: string;
  passwordErrors?: FieldErrors;
  pairing?: Pairing;
  pairingError?: string;
}) {
  const passwordField = (name: string, text: string, autocomplete: string) => (
    <div class={`form-row${passwordErrors?.[name] ? ' has-errors' : ''}`}>
      <label for={`id_${name}`} class="required">
        {text}
      </label>
      <div class="field-body">
        <input type="password" name={name} id={`id_${name}`} autocomplete={autocomplete} required aria-invalid={passwordErrors?.[name] ? 'true' : undefined} />
        <ErrorList errors={passwordErrors?.[name]} />
      </div>
    </div>
  );
  return (
    <div class="account-sections">
      <section class="panel" id="password">
        <h2>Change password</h2>
        <p class="help">At least 12 characters, not a common password, not only digits, not too similar to your name or email. Your other web sessions end; this one stays signed in.</p>
        {passwordError && (
          <p class="errornote" role="alert">
            {passwordError}
          </p>
        )}
        <form method="post" action={ownUrl(userId, 'password/#password')}>
          <CsrfField token={csrfToken} />
          {passwordField('old_password', 'Old password', 'current-password')}
          {passwordField('new_password1', 'New password', 'new-password')}
          {passwordField('new_password2', 'New password confirmation', 'new-password')}
          <button type="submit">Change my password</button>
        </form>
      </section>
      <section class="panel" id="pairing">
        <h2>Pair a phone</h2>
        {pairingError && (
          <p class="errornote" role="alert">
            {pairingError}
          </p>
        )}
        {pairing ? (
          <div class="pairing">
            <img src={pairing.image} alt="QR code that signs the Warden app in as you" width={264} height={264} />
            <p>
              Scan it with the Warden app. It works once, until {formatDateTime(pairing.expiresAt, preferences)}. Do not share it: whoever scans it is signed in as you.
            </p>
          </div>
        ) : (
          <p class="help">A QR code signs the Warden app in as you. It is valid once, for five minutes.</p>
        )}
        <form method="post" action={ownUrl(userId, 'pairing/#pairing')}>
          <CsrfField token={csrfToken} />
          <button type="submit" class={pairing ? 'button-secondary' : undefined}>
            {pairing ? 'Show a new code' : 'Show a pairing code'}
          </button>
        </form>
      </section>
    </div>
  );
}

type SectionState = Omit<Parameters<typeof AccountSections>[0], 'userId' | 'csrfToken' | 'preferences'>;

function sections(ctx: Context, extra: SectionState = {}) {
  const state = adminState(ctx);
  return <AccountSections userId={state.principal.user.id} csrfToken={state.session.csrfToken} preferences={state.principal.user} {...extra} />;
}

function userModel(app: AppContext) {
  return app.backoffice.site.get(USER_APP, USER_MODEL)!;
}

export async function showOwnPage(ctx: Context, app: AppContext): Promise<void> {
  await renderObjectPage(ctx, app, userModel(app), ctx.params.pk!, { ownPage: true, extras: sections(ctx) });
}

export async function postOwnPage(ctx: Context, app: AppContext): Promise<void> {
  await submitObjectForm(ctx, app, userModel(app), ctx.params.pk!, { ownPage: true, extras: sections(ctx) });
}

function ownOnly(ctx: Context): void {
  if (!isOwnPage(ctx)) forbidden('You can change only your own password and pair only your own phone.');
}

export async function postPassword(ctx: Context, app: AppContext): Promise<void> {
  ownOnly(ctx);
  const state = adminState(ctx);
  const form = state.form!;
  const { id, username } = state.principal.user;
  let result;
  try {
    result = await throttledPasswordChange(app.db, username, () =>
      changePassword(
        app.db,
        id,
        { old_password: form.get('old_password') ?? '', new_password1: form.get('new_password1') ?? '', new_password2: form.get('new_password2') ?? '' },
        { actor: { type: 'staff', id }, keepSessionHash: state.session.idHash },
      ),
    );
  } catch (caught) {
    if (!(caught instanceof LoginThrottledError)) throw caught;
    // As the login page does when it trips: the form again, with the throttle's error and nothing about the password.
    ctx.set('Retry-After', String(caught.retryAfterSeconds));
    return renderObjectPage(ctx, app, userModel(app), id, { ownPage: true, status: 429, extras: sections(ctx, { passwordError: caught.message }) });
  }
  if (result.ok) {
    await addMessage(app.db, state.session, { level: 'success', text: 'Your password was changed. Your other web sessions have ended.' });
    return ctx.redirect(ownUrl(id, 'change/'));
  }
  await renderObjectPage(ctx, app, userModel(app), id, { ownPage: true, status: 400, extras: sections(ctx, { passwordErrors: result.errors }) });
}

export async function postPairing(ctx: Context, app: AppContext): Promise<void> {
  ownOnly(ctx);
  const state = adminState(ctx);
  let extra: SectionState;
  try {
    const ticket = await issueLoginTicket(app.db, state.principal.user.id, app.now?.() ?? new Date());
    const image = await QRCode.toDataURL(JSON.stringify(ticket.qr), { errorCorrectionLevel: 'M', margin: 2, width: 264 });
    extra = { pairing: { image, expiresAt: new Date(`${ticket.expires_at}Z`) } };
  } catch (caught) {
    if (!(caught instanceof TicketRefusedError)) throw caught;
    extra = { pairingError: caught.message };
  }
  // Shown in this response only: a ticket is a secret and is never kept in the session.
  await renderObjectPage(ctx, app, userModel(app), state.principal.user.id, { ownPage: true, extras: sections(ctx, extra) });
}
