# Independent oracle for the hand-computed expectations in catalog_test.go:
# gpuhunt's matches() semantics written out directly over the shared CSVs,
# with the knowledge-table memory snapping (within 7%) hoist applies.
# Run: python3 testdata/expected.py  (prints count, 3 cheapest, most expensive)
import csv,glob,os,sys
SNAP={'A40':[48],'L40S':[48],'H100':[80],'H100NVL':[94],'H200':[141],'B200':[180],'RTX5090':[32],'RTXPRO6000':[96],'B300':[270,262],'A100':[40,80],'V100':[16,32],'RTX4090':[24],'RTX3090':[24],'RTX3060':[8,12],'RTX3070':[8],'RTX3080':[10],'RTX4060':[8],'RTX4070':[12],'A2000':[6,12],'A6000':[48],'RTX6000Ada':[48],'T4':[16],'A10G':[24],'M60':[8],'K80':[12],'K520':[4],'T4g':[16],'L4':[24],'L40':[48],'A4000':[16],'A5000':[24],'A800':[40,80],'A10':[24],'GH200':[96],'RTX6000':[24]}
BACK={'lambdalabs':'lambda','vast':'vastai','datacrunch':'verda'}
rows=[]
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'snapshot', '*.csv'))):
    prov=os.path.basename(f)[:-4]
    for r in csv.DictReader(open(f)):
        name=r['gpu_name'] or ''
        mem=float(r['gpu_memory']) if r['gpu_memory'] else 0.0
        vendor=(r.get('gpu_vendor') or '').lower()
        cnt=int(r['gpu_count'])
        if name=='Radeon Pro V520': name='V520'; vendor=vendor or 'amd'
        if cnt>0 and not vendor: vendor='nvidia'
        if name in SNAP and mem>0:
            best=min(SNAP[name],key=lambda m:abs(m-mem))
            if abs(best-mem)<=0.07*best: mem=best
        rows.append(dict(backend=BACK.get(prov,prov),inst=r['instance_name'],region=r['location'],price=float(r['price']),
            cpu=int(r['cpu']),mem=float(r['memory']),gpus=cnt,name=name,gmem=mem,spot=r['spot']=='True',vendor=vendor,
            arch=(r.get('cpu_arch') or 'x86')))
def inr(v,lo,hi): return (lo is None or v>=lo) and (hi is None or v<=hi)
def q(names=None,gmem=(None,None),count=(None,None),vendor=None,spot=False,both=False,backends=None,maxp=None,cpu=(None,None),mem=(None,None),arch=None,tmem=(None,None),regions=None):
    out=[]
    for r in rows:
        if backends and r['backend'] not in backends: continue
        if maxp and r['price']>maxp: continue
        if not both and r['spot']!=spot: continue
        if arch and r['arch']!=arch: continue
        if not inr(r['cpu'],*cpu) or not inr(r['mem'],*mem): continue
        if regions and r['region'].lower() not in regions: continue
        if not (count[0]==0 and r['gpus']==0):
            if vendor and r['vendor']!=vendor: continue
            if not inr(r['gpus'],*count): continue
            if names and (r['name'].lower() not in [n.lower() for n in names]): continue
            if not inr(r['gmem'],*gmem): continue
            if not inr(r['gmem']*r['gpus'],*tmem): continue
        out.append(r)
    out.sort(key=lambda r:(r['price'],r['backend'],r['region'],r['inst'],r['spot']))
    return out
def show(label,res):
    print(label,len(res))
    for r in res[:3]+res[-1:]:
        print('   {"%s", "%s", "%s", %r},'%(r['backend'],r['inst'],r['region'],r['price']))
show('A100:80GB:8',q(names=['A100'],gmem=(80,80),count=(8,8)))
show('24GB..:2',q(gmem=(24,None),count=(2,2)))
show('nvidia:1..8',q(vendor='nvidia',count=(1,8)))
show('MI300X',q(names=['MI300X'],count=(1,None)))
show('0',q(count=(0,0)))
show('amd',q(vendor='amd',count=(1,None)))
show('cpu-only 64.. 256GB..',q(count=(0,0),cpu=(64,None),mem=(256,None)))
show('spot H100',q(names=['H100'],count=(1,None),spot=True))
show('auto verda B300',q(names=['B300'],count=(1,None),both=True,backends=['verda']))
show('lambda arm',q(arch='arm',backends=['lambda']))
show('maxprice 0.5 gpu 1..',q(count=(1,None),maxp=0.5))
show('total 640GB.. ',q(count=(1,None),tmem=(640,None)))
show('gpu 0.. with name H100', q(names=['H100'],count=(0,None)))
