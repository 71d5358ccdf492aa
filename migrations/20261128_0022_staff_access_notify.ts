import type { Knex } from 'knex';

/**
 * What a staff user may do, announced whenever it changes, whoever wrote it (the web admin, the
 * mobile data API, the command line, another process or plain SQL): the staff live socket reloads
 * the user's grants, or closes their sockets, when it hears of it.
 *
 * - warden_staff_access, payload a user id: the user's active/staff/superuser flags changed or the
 *   user was deleted; a direct permission or a group membership of theirs was added or removed; or
 *   a permission of one of their groups was (one notification per member: the socket needs no
 *   group lookup).
 * - warden_mobile_devices, payload a device id: the device was revoked or deleted. revokeDevice
 *   announces it too; PostgreSQL folds identical notifications of one transaction into one.
 *
 * Notifications go out at commit and never on rollback, in commit order with the live socket's own
 * messages (warden_live), so a broadcast published after a change reaches sockets after it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create function staff_access_user_announce() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        perform pg_notify('warden_staff_access', old.id::text);
      elsif (old.is_active, old.is_staff, old.is_superuser) is distinct from (new.is_active, new.is_staff, new.is_superuser) then
        perform pg_notify('warden_staff_access', new.id::text);
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger staff_users_access_announce after update of is_active, is_staff, is_superuser or delete on staff_users
    for each row execute function staff_access_user_announce()`);

  // staff_user_groups and staff_user_permissions: the user of the row (both, should an update move it)
  await knex.raw(`
    create function staff_access_member_announce() returns trigger language plpgsql as $$
    begin
      if tg_op <> 'INSERT' then perform pg_notify('warden_staff_access', old.user_id::text); end if;
      if tg_op <> 'DELETE' then perform pg_notify('warden_staff_access', new.user_id::text); end if;
      return null;
    end $$`);
  for (const table of ['staff_user_groups', 'staff_user_permissions']) {
    await knex.raw(`
      create trigger ${table}_access_announce after insert or update or delete on ${table}
      for each row execute function staff_access_member_announce()`);
  }

  // staff_group_permissions: every member of the group
  await knex.raw(`
    create function staff_access_group_announce() returns trigger language plpgsql as $$
    begin
      if tg_op <> 'INSERT' then
        perform pg_notify('warden_staff_access', ug.user_id::text) from staff_user_groups ug where ug.group_id = old.group_id;
      end if;
      if tg_op <> 'DELETE' then
        perform pg_notify('warden_staff_access', ug.user_id::text) from staff_user_groups ug where ug.group_id = new.group_id;
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger staff_group_permissions_access_announce after insert or update or delete on staff_group_permissions
    for each row execute function staff_access_group_announce()`);

  await knex.raw(`
    create function mobile_device_revoked_announce() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        if old.revoked_at is null then perform pg_notify('warden_mobile_devices', old.id::text); end if;
      elsif new.revoked_at is not null and old.revoked_at is null then
        perform pg_notify('warden_mobile_devices', new.id::text);
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger mobile_devices_revoked_announce after update of revoked_at or delete on mobile_devices
    for each row execute function mobile_device_revoked_announce()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger if exists mobile_devices_revoked_announce on mobile_devices');
  await knex.raw('drop trigger if exists staff_group_permissions_access_announce on staff_group_permissions');
  await knex.raw('drop trigger if exists staff_user_permissions_access_announce on staff_user_permissions');
  await knex.raw('drop trigger if exists staff_user_groups_access_announce on staff_user_groups');
  await knex.raw('drop trigger if exists staff_users_access_announce on staff_users');
  await knex.raw('drop function if exists mobile_device_revoked_announce()');
  await knex.raw('drop function if exists staff_access_group_announce()');
  await knex.raw('drop function if exists staff_access_member_announce()');
  await knex.raw('drop function if exists staff_access_user_announce()');
}
