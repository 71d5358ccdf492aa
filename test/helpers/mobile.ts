import { permissionCodenames } from '../../src/app/registrations.ts';
import { issueLoginTicket } from '../../src/modules/mobile/tickets.ts';
import { createUser, type NewStaffUser } from '../../src/modules/staff/service.ts';
import type { StaffUser } from '../../src/modules/staff/principal.ts';
import type { TestApp } from './app.ts';

export const PAIR = '/api/mobile/auth/qr/';
export const REFRESH = '/api/mobile/auth/refresh/';
export const LOGOUT = '/api/mobile/auth/logout/';
export const ME = '/api/mobile/me/';
export const PREFERENCES = '/api/mobile/me/preferences/';
export const AVAILABILITY = '/api/mobile/me/video-call-availability/';
export const PASSWORD = '/api/mobile/me/password/';

export const operator = { type: 'operator', id: 'test' } as const;

/** A clock the app reads instead of the system's: tests move it, never sleep. */
export interface TestClock {
  now: Date;
  advance(seconds: number): void;
}

export function installClock(app: TestApp): TestClock {
  const clock: TestClock = {
    now: new Date(Math.floor(Date.now() / 1000) * 1000),
    advance(seconds) {
      clock.now = new Date(clock.now.getTime() + seconds * 1000);
    },
  };
  app.context.now = () => clock.now;
  return clock;
}

let counter = 0;

/** A staff user made through the staff module, with a unique name unless one is given. */
export async function staffUser(app: TestApp, input: Partial<NewStaffUser> = {}): Promise<StaffUser> {
  counter += 1;
  return createUser(
    app.database.knex,
    { username: `staff${counter}-${process.pid}`, password: 'correct horse battery staple 42', ...input },
    { actor: operator, known: new Set(permissionCodenames()) },
  );
}

export interface Paired {
  accessToken: string;
  refreshToken: string;
  deviceId: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** Issues a login ticket for the user and pairs a device with it through the API. */
export async function pairDevice(app: TestApp, clock: TestClock, userId: string, deviceName = 'Pixel 9'): Promise<Paired> {
  const { qr } = await issueLoginTicket(app.database.knex, userId, clock.now);
  const response = await app.request('POST', PAIR, { json: { ticket: qr.ticket, device_name: deviceName, platform: 'android', app_version: '1.4.2' } });
  if (response.status !== 200) throw new Error(`pairing failed: ${response.status} ${response.text}`);
  const data = response.body.data;
  return { accessToken: data.access_token, refreshToken: data.refresh_token, deviceId: data.device_id, body: response.body };
}
