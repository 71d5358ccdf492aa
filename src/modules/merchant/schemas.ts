import { z } from '../../http/openapi.ts';

export const tokenRequest = z
  .object({
    api_key: z.string().min(1).max(200),
    api_secret: z.string().min(1).max(200),
  })
  .openapi('TokenRequest');

export const tokenData = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int().openapi({ description: 'Seconds until the token expires (WARDEN_TOKEN_TTL_SECONDS).' }),
  })
  .openapi('TokenData');

export const checkData = z
  .object({ client: z.string(), session_id: z.string() })
  .openapi('TokenCheckData');
