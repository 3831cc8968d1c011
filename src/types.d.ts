declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.js.asset" {
  const path: string;
  export default path;
}
declare module "*.ico" {
  const path: string;
  export default path;
}
